package proxyconfig

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
	"sigs.k8s.io/yaml"
)

// Values reads the command line after the file has filled it in
// (*cli.Context is one).
type Values interface {
	String(name string) string
	StringSlice(name string) []string
	Bool(name string) bool
	Int(name string) int
	Float64(name string) float64
	Duration(name string) time.Duration
}

// Effective is the configuration the proxier runs with, as a
// KubeProxyConfiguration: what --write-config-to writes and /configz serves.
func Effective(v Values) *v1alpha1.KubeProxyConfiguration {
	d := func(name string) metav1.Duration { return metav1.Duration{Duration: v.Duration(name)} }
	i32 := func(name string) *int32 { n := int32(v.Int(name)); return &n }
	c := &v1alpha1.KubeProxyConfiguration{
		TypeMeta:            metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		HostnameOverride:    v.String("hostname-override"),
		BindAddress:         v.String("bind-address"),
		HealthzBindAddress:  v.String("healthz-bind-address"),
		MetricsBindAddress:  v.String("metrics-bind-address"),
		BindAddressHardFail: v.Bool("bind-address-hard-fail"),
		EnableProfiling:     v.Bool("profiling"),
		Mode:                v1alpha1.ProxyMode(v.String("proxy-mode")),
		ClusterCIDR:         v.String("cluster-cidr"),
		DetectLocalMode:     v1alpha1.LocalMode(v.String("detect-local-mode")),
		NodePortAddresses:   splitAll(v.StringSlice("nodeport-addresses")),
		OOMScoreAdj:         i32("oom-score-adj"),
		ConfigSyncPeriod:    d("config-sync-period"),
	}
	c.ClientConnection.Kubeconfig = v.String("kubeconfig")
	c.ClientConnection.QPS = float32(v.Float64("kube-api-qps"))
	c.ClientConnection.Burst = int32(v.Int("kube-api-burst"))
	c.ClientConnection.ContentType = v.String("kube-api-content-type")
	c.ClientConnection.AcceptContentTypes = v.String("kube-api-accept-content-types")
	c.FeatureGates, _ = ParseFeatureGates(v.String("feature-gates")) // checked at start-up
	c.ShowHiddenMetricsForVersion = v.String("show-hidden-metrics-for-version")
	c.Logging.Format = v.String("logging-format")
	c.IPVS = v1alpha1.KubeProxyIPVSConfiguration{
		SyncPeriod: d("ipvs-sync-period"), MinSyncPeriod: d("ipvs-min-sync-period"), Scheduler: v.String("ipvs-scheduler"),
		ExcludeCIDRs: splitAll(v.StringSlice("ipvs-exclude-cidrs")), StrictARP: v.Bool("ipvs-strict-arp"),
		TCPTimeout: d("ipvs-tcp-timeout"), TCPFinTimeout: d("ipvs-tcpfin-timeout"), UDPTimeout: d("ipvs-udp-timeout"),
	}
	c.IPTables.MasqueradeAll = v.Bool("masquerade-all")
	c.IPTables.MasqueradeBit = i32("iptables-masquerade-bit")
	c.DetectLocal.BridgeInterface = v.String("pod-bridge-interface")
	c.DetectLocal.InterfaceNamePrefix = v.String("pod-interface-name-prefix")
	established, closeWait := d("conntrack-tcp-timeout-established"), d("conntrack-tcp-timeout-close-wait")
	c.Conntrack = v1alpha1.KubeProxyConntrackConfiguration{
		MaxPerCore: i32("conntrack-max-per-core"), Min: i32("conntrack-min"),
		TCPEstablishedTimeout: &established, TCPCloseWaitTimeout: &closeWait, TCPBeLiberal: v.Bool("conntrack-tcp-be-liberal"),
		UDPTimeout: d("conntrack-udp-timeout"), UDPStreamTimeout: d("conntrack-udp-timeout-stream"),
	}
	return c
}

func splitAll(list []string) []string {
	var out []string
	for _, s := range list {
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// Write writes c to path as YAML (--write-config-to).
func Write(path string, c *v1alpha1.KubeProxyConfiguration) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("--write-config-to: %w", err)
	}
	return nil
}

// Configz is /configz's answer, as upstream serves it: the configuration
// under its group's name.
func Configz(c *v1alpha1.KubeProxyConfiguration) ([]byte, error) {
	return json.Marshal(map[string]any{v1alpha1.GroupName: c})
}
