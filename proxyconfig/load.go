// Package proxyconfig reads kube-proxy's configuration file, a
// KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) in the published
// types of k8s.io/kube-proxy, so that a kubeadm ConfigMap runs unchanged.
package proxyconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// File is a loaded configuration file: the configuration, and what is worth
// telling the operator about it.
type File struct {
	Config *v1alpha1.KubeProxyConfiguration
	// Unknown are fields the file has and the type does not (a typo, or a
	// field of another version): ignored, as upstream does, but named.
	Unknown []string
	// Ignored are fields set for other proxy modes, or unused by upstream
	// too: accepted and ignored.
	Ignored []string
	// From names, for each flag Apply set, the field it came from: an
	// error about the value names what the operator wrote.
	From map[string]string
}

const (
	apiVersion = "kubeproxy.config.k8s.io/v1alpha1"
	kind       = "KubeProxyConfiguration"
)

// Load reads path. A file that is not a KubeProxyConfiguration, or does
// not parse, is an error; unknown fields are not (see File.Unknown).
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	return Parse(data)
}

// Parse decodes a KubeProxyConfiguration. Unknown fields are ignored, as
// upstream does, and named in File.Unknown.
func Parse(data []byte) (*File, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	f := &File{Config: &v1alpha1.KubeProxyConfiguration{}}
	if err := yaml.Unmarshal(data, f.Config); err != nil {
		if field := failingField(doc); field != "" {
			return nil, fmt.Errorf("--config: %s: %w", field, err)
		}
		return nil, fmt.Errorf("--config: %w", err)
	}
	f.Unknown = unknownFields(doc, reflect.TypeOf(*f.Config), "")
	c := f.Config
	if c.APIVersion != apiVersion || c.Kind != kind {
		return nil, fmt.Errorf("--config: apiVersion %q, kind %q: want %s, %s", c.APIVersion, c.Kind, apiVersion, kind)
	}
	if c.Mode != "" && c.Mode != "ipvs" {
		return nil, fmt.Errorf("--config: mode: %q is not supported: kube-ipvs-proxy only implements \"ipvs\"", c.Mode)
	}
	if err := validate(c); err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	f.Ignored = otherModes(c)
	return f, nil
}

// validate checks what the flags' own checks cannot name as fields.
func validate(c *v1alpha1.KubeProxyConfiguration) error {
	var errs []error
	ipvs := c.IPVS
	if ipvs.SyncPeriod.Duration < 0 {
		errs = append(errs, fmt.Errorf("ipvs.syncPeriod: %s: must be greater than 0", ipvs.SyncPeriod.Duration))
	}
	if ipvs.MinSyncPeriod.Duration < 0 {
		errs = append(errs, fmt.Errorf("ipvs.minSyncPeriod: %s: must be 0 or more", ipvs.MinSyncPeriod.Duration))
	}
	if ipvs.SyncPeriod.Duration > 0 && ipvs.MinSyncPeriod.Duration > ipvs.SyncPeriod.Duration {
		errs = append(errs, fmt.Errorf("ipvs.minSyncPeriod: %s: must not be above ipvs.syncPeriod (%s)", ipvs.MinSyncPeriod.Duration, ipvs.SyncPeriod.Duration))
	}
	for name, d := range map[string]float64{"ipvs.tcpTimeout": ipvs.TCPTimeout.Seconds(), "ipvs.tcpFinTimeout": ipvs.TCPFinTimeout.Seconds(), "ipvs.udpTimeout": ipvs.UDPTimeout.Seconds()} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s: must be 0 or more", name))
		}
	}
	// Checked whatever detectLocalMode says (a flag may change it), as
	// the flags are; empty is unset.
	for _, f := range []struct {
		field, value string
		prefix       bool
	}{
		{"detectLocal.bridgeInterface", c.DetectLocal.BridgeInterface, false},
		{"detectLocal.interfaceNamePrefix", c.DetectLocal.InterfaceNamePrefix, true},
	} {
		if f.value == "" {
			continue
		}
		if err := InterfaceName(f.value, f.prefix); err != nil {
			errs = append(errs, fmt.Errorf("%s: %q: %w", f.field, f.value, err))
		}
	}
	return errors.Join(errs...)
}

// otherModes lists the fields set for the iptables, nftables and winkernel
// modes, which IPVS mode does not read (the iptables section's
// masqueradeAll and masqueradeBit excepted: upstream's IPVS mode uses them).
func otherModes(c *v1alpha1.KubeProxyConfiguration) []string {
	var out []string
	add := func(set bool, name string) {
		if set {
			out = append(out, name)
		}
	}
	add(c.IPTables.SyncPeriod.Duration != 0, "iptables.syncPeriod")
	add(c.IPTables.MinSyncPeriod.Duration != 0, "iptables.minSyncPeriod")
	add(c.IPTables.LocalhostNodePorts != nil, "iptables.localhostNodePorts")
	add(c.NFTables.MasqueradeBit != nil, "nftables.masqueradeBit")
	add(c.NFTables.MasqueradeAll, "nftables.masqueradeAll")
	add(c.NFTables.SyncPeriod.Duration != 0, "nftables.syncPeriod")
	add(c.NFTables.MinSyncPeriod.Duration != 0, "nftables.minSyncPeriod")
	w := c.Winkernel
	add(w.NetworkName != "" || w.SourceVip != "" || w.EnableDSR || w.RootHnsEndpointName != "" || w.ForwardHealthCheckVip, "winkernel")
	add(c.WindowsRunAsService, "windowsRunAsService")
	add(c.PortRange != "", "portRange") // unused by upstream too
	return out
}

// unknownFields lists the keys of doc, at any depth, that type t (a struct)
// has no field for, by their JSON names.
func unknownFields(doc map[string]any, t reflect.Type, prefix string) []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(doc)) {
		field, ok := jsonField(t, key)
		if !ok {
			out = append(out, prefix+key)
			continue
		}
		if sub, isMap := doc[key].(map[string]any); isMap && field.Kind() == reflect.Struct {
			out = append(out, unknownFields(sub, field, prefix+key+".")...)
		}
	}
	return out
}

// jsonField finds the type of t's field named key in JSON, looking into
// embedded structs (TypeMeta's apiVersion and kind).
func jsonField(t reflect.Type, key string) (reflect.Type, bool) {
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if sf.Anonymous && name == "" {
			if ft, ok := jsonField(sf.Type, key); ok {
				return ft, true
			}
			continue
		}
		if name == key {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			return ft, true
		}
	}
	return nil, false
}

// failingField finds the field whose value does not decode, since the
// decoder's own error does not name it for some types (durations).
func failingField(doc map[string]any) string {
	decodes := func(d map[string]any) bool {
		b, err := json.Marshal(d)
		return err == nil && json.Unmarshal(b, &v1alpha1.KubeProxyConfiguration{}) == nil
	}
	for _, key := range slices.Sorted(maps.Keys(doc)) {
		if sub, isMap := doc[key].(map[string]any); isMap {
			for _, k2 := range slices.Sorted(maps.Keys(sub)) {
				if !decodes(map[string]any{key: map[string]any{k2: sub[k2]}}) {
					return key + "." + k2
				}
			}
		} else if !decodes(map[string]any{key: doc[key]}) {
			return key
		}
	}
	return ""
}
