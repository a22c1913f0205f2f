package proxyconfig

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Flags is the command line the file fills in. A flag given there wins
// over the file, as upstream: IsSet says it was.
type Flags interface {
	IsSet(name string) bool
	Set(name, value string) error
}

// Apply sets, from the file, each flag the command line did not give. A
// field left at its zero value counts as not given (the flag keeps its
// default).
func (f *File) Apply(flags Flags) (err error) {
	c := f.Config
	set := func(flag, field, value string) {
		if err != nil || value == "" || flags.IsSet(flag) {
			return
		}
		if e := flags.Set(flag, value); e != nil {
			err = fmt.Errorf("--config: %s: %q: %w", field, value, e)
			return
		}
		if f.From == nil {
			f.From = map[string]string{}
		}
		f.From[flag] = field
	}
	duration := func(d time.Duration) string {
		if d == 0 {
			return ""
		}
		return d.String()
	}
	boolean := func(b bool) string {
		if !b {
			return ""
		}
		return "true"
	}
	cc := c.ClientConnection
	set("kubeconfig", "clientConnection.kubeconfig", cc.Kubeconfig)
	if cc.QPS != 0 {
		set("kube-api-qps", "clientConnection.qps", strconv.FormatFloat(float64(cc.QPS), 'f', -1, 32))
	}
	if cc.Burst != 0 {
		set("kube-api-burst", "clientConnection.burst", strconv.Itoa(int(cc.Burst)))
	}
	set("kube-api-content-type", "clientConnection.contentType", cc.ContentType)
	set("kube-api-accept-content-types", "clientConnection.acceptContentTypes", cc.AcceptContentTypes)
	set("bind-address", "bindAddress", c.BindAddress)
	set("feature-gates", "featureGates", FormatFeatureGates(c.FeatureGates))
	set("show-hidden-metrics-for-version", "showHiddenMetricsForVersion", c.ShowHiddenMetricsForVersion)
	set("logging-format", "logging.format", c.Logging.Format)
	set("hostname-override", "hostnameOverride", c.HostnameOverride)
	set("proxy-mode", "mode", string(c.Mode))
	set("healthz-bind-address", "healthzBindAddress", c.HealthzBindAddress)
	set("metrics-bind-address", "metricsBindAddress", c.MetricsBindAddress)
	set("bind-address-hard-fail", "bindAddressHardFail", boolean(c.BindAddressHardFail))
	set("profiling", "enableProfiling", boolean(c.EnableProfiling))
	set("config-sync-period", "configSyncPeriod", duration(c.ConfigSyncPeriod.Duration))
	set("ipvs-scheduler", "ipvs.scheduler", c.IPVS.Scheduler)
	set("ipvs-sync-period", "ipvs.syncPeriod", duration(c.IPVS.SyncPeriod.Duration))
	set("ipvs-min-sync-period", "ipvs.minSyncPeriod", duration(c.IPVS.MinSyncPeriod.Duration))
	set("ipvs-exclude-cidrs", "ipvs.excludeCIDRs", strings.Join(c.IPVS.ExcludeCIDRs, ","))
	set("ipvs-strict-arp", "ipvs.strictARP", boolean(c.IPVS.StrictARP))
	set("ipvs-tcp-timeout", "ipvs.tcpTimeout", duration(c.IPVS.TCPTimeout.Duration))
	set("ipvs-tcpfin-timeout", "ipvs.tcpFinTimeout", duration(c.IPVS.TCPFinTimeout.Duration))
	set("ipvs-udp-timeout", "ipvs.udpTimeout", duration(c.IPVS.UDPTimeout.Duration))
	// Upstream's IPVS mode masquerades by the iptables section's settings.
	set("masquerade-all", "iptables.masqueradeAll", boolean(c.IPTables.MasqueradeAll))
	if c.IPTables.MasqueradeBit != nil {
		set("iptables-masquerade-bit", "iptables.masqueradeBit", strconv.Itoa(int(*c.IPTables.MasqueradeBit)))
	}
	set("cluster-cidr", "clusterCIDR", c.ClusterCIDR)
	set("detect-local-mode", "detectLocalMode", string(c.DetectLocalMode))
	set("pod-bridge-interface", "detectLocal.bridgeInterface", c.DetectLocal.BridgeInterface)
	set("pod-interface-name-prefix", "detectLocal.interfaceNamePrefix", c.DetectLocal.InterfaceNamePrefix)
	set("nodeport-addresses", "nodePortAddresses", strings.Join(c.NodePortAddresses, ","))
	number := func(n *int32) string {
		if n == nil {
			return ""
		}
		return strconv.Itoa(int(*n))
	}
	set("oom-score-adj", "oomScoreAdj", number(c.OOMScoreAdj))
	ct := c.Conntrack
	pointer := func(d *metav1.Duration) string {
		if d == nil {
			return ""
		}
		return d.Duration.String() // 0 given: leave the kernel's
	}
	set("conntrack-max-per-core", "conntrack.maxPerCore", number(ct.MaxPerCore))
	set("conntrack-min", "conntrack.min", number(ct.Min))
	set("conntrack-tcp-timeout-established", "conntrack.tcpEstablishedTimeout", pointer(ct.TCPEstablishedTimeout))
	set("conntrack-tcp-timeout-close-wait", "conntrack.tcpCloseWaitTimeout", pointer(ct.TCPCloseWaitTimeout))
	set("conntrack-tcp-be-liberal", "conntrack.tcpBeLiberal", boolean(ct.TCPBeLiberal))
	set("conntrack-udp-timeout", "conntrack.udpTimeout", duration(ct.UDPTimeout.Duration))
	set("conntrack-udp-timeout-stream", "conntrack.udpStreamTimeout", duration(ct.UDPStreamTimeout.Duration))
	return err
}

// ParseFeatureGates reads --feature-gates: Name=true|false pairs, separated
// by commas.
func ParseFeatureGates(s string) (map[string]bool, error) {
	var gates map[string]bool
	for _, pair := range strings.Split(s, ",") {
		if pair = strings.TrimSpace(pair); pair == "" {
			continue
		}
		name, value, ok := strings.Cut(pair, "=")
		on, err := strconv.ParseBool(strings.TrimSpace(value))
		if name = strings.TrimSpace(name); !ok || name == "" || err != nil {
			return nil, fmt.Errorf("%q: want Name=true or Name=false", pair)
		}
		if gates == nil {
			gates = map[string]bool{}
		}
		gates[name] = on
	}
	return gates, nil
}

// FormatFeatureGates writes gates as --feature-gates takes them, sorted.
func FormatFeatureGates(gates map[string]bool) string {
	var pairs []string
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		pairs = append(pairs, name+"="+strconv.FormatBool(gates[name]))
	}
	return strings.Join(pairs, ",")
}
