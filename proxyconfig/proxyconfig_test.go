package proxyconfig

import (
	"flag"
	"slices"
	"strings"
	"testing"
)

// kubeadm is the configuration kubeadm writes to the kube-proxy ConfigMap,
// with this node's choices filled in.
const kubeadm = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
bindAddress: 0.0.0.0
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
healthzBindAddress: ""
hostnameOverride: ""
iptables:
  localhostNodePorts: null
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: "wrr"
  strictARP: true
  syncPeriod: 15s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
metricsBindAddress: ""
mode: "ipvs"
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: ""
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
`

// flags is a command line of string flags, some given.
type flags struct{ fs *flag.FlagSet }

func newFlags(given map[string]string, names ...string) flags {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	for _, n := range names {
		fs.String(n, "", "")
	}
	for n, v := range given {
		_ = fs.Set(n, v)
	}
	return flags{fs}
}

func (f flags) IsSet(name string) bool {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == name })
	return set
}
func (f flags) Set(name, value string) error { return f.fs.Set(name, value) }
func (f flags) get(name string) string       { return f.fs.Lookup(name).Value.String() }

func TestKubeadmConfigFillsTheFlagsTheCommandLineLeaves(t *testing.T) {
	f, err := Parse([]byte(kubeadm))
	if err != nil {
		t.Fatal(err)
	}
	fl := newFlags(map[string]string{"ipvs-scheduler": "rr"}, "kubeconfig", "hostname-override", "proxy-mode", "healthz-bind-address",
		"metrics-bind-address", "bind-address-hard-fail", "profiling", "config-sync-period", "ipvs-scheduler", "ipvs-sync-period",
		"ipvs-min-sync-period", "ipvs-exclude-cidrs", "ipvs-strict-arp", "ipvs-tcp-timeout", "ipvs-tcpfin-timeout", "ipvs-udp-timeout",
		"masquerade-all", "iptables-masquerade-bit", "cluster-cidr", "detect-local-mode", "pod-bridge-interface",
		"pod-interface-name-prefix", "nodeport-addresses", "bind-address")
	if err := f.Apply(fl); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"kubeconfig": "/var/lib/kube-proxy/kubeconfig.conf", "cluster-cidr": "10.244.0.0/16", "proxy-mode": "ipvs",
		"ipvs-sync-period": "15s", "ipvs-strict-arp": "true", "bind-address": "0.0.0.0",
		"ipvs-scheduler":       "rr", // the command line wins
		"ipvs-min-sync-period": "",   // zero: the flag's default stays
	} {
		if got := fl.get(name); got != want {
			t.Errorf("--%s = %q, want %q", name, got, want)
		}
	}
	if len(f.Unknown)+len(f.Ignored) != 0 {
		t.Errorf("unknown %v, ignored %v: want none for kubeadm's defaults", f.Unknown, f.Ignored)
	}
}

func TestConfigFileErrorsNameTheField(t *testing.T) {
	head := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	for _, c := range []struct{ body, want string }{
		{"mode: iptables\n", "mode"},
		{"ipvs:\n  syncPeriod: 5s\n  minSyncPeriod: 10s\n", "ipvs.minSyncPeriod"},
		{"ipvs:\n  tcpTimeout: -1s\n", "ipvs.tcpTimeout"},
		{"ipvs:\n  syncPeriod: often\n", "syncPeriod"},
		// A newline in an interface name would add an iptables rule.
		{"detectLocal:\n  bridgeInterface: \"cbr0\\n-I INPUT -j ACCEPT\"\n", "detectLocal.bridgeInterface"},
		{"detectLocal:\n  interfaceNamePrefix: \"veth\\\"\"\n", "detectLocal.interfaceNamePrefix"},
	} {
		_, err := Parse([]byte(head + c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one naming %s", c.body, err, c.want)
		}
	}
	if _, err := Parse([]byte("apiVersion: v1\nkind: ConfigMap\n")); err == nil {
		t.Error("a ConfigMap was taken for a KubeProxyConfiguration")
	}
}

func TestConfigFileClientLoggingAndOOMFields(t *testing.T) {
	f, err := Parse([]byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n" +
		"clientConnection:\n  qps: 50\n  burst: 100\n  contentType: application/json\n  acceptContentTypes: application/json\n" +
		"logging:\n  format: json\noomScoreAdj: -500\nbindAddress: 10.0.2.15\nfeatureGates:\n  Zeta: false\n  Alpha: true\n" +
		"showHiddenMetricsForVersion: \"1.33\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	fl := newFlags(nil, "kube-api-qps", "kube-api-burst", "kube-api-content-type", "kube-api-accept-content-types", "logging-format",
		"oom-score-adj", "bind-address", "feature-gates", "show-hidden-metrics-for-version")
	if err := f.Apply(fl); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"kube-api-qps": "50", "kube-api-burst": "100", "kube-api-content-type": "application/json",
		"kube-api-accept-content-types": "application/json", "logging-format": "json", "oom-score-adj": "-500",
		"bind-address": "10.0.2.15", "feature-gates": "Alpha=true,Zeta=false", "show-hidden-metrics-for-version": "1.33"} {
		if got := fl.get(name); got != want {
			t.Errorf("--%s = %q, want %q", name, got, want)
		}
	}
}

func TestConfigFileUnknownAndOtherModeFields(t *testing.T) {
	f, err := Parse([]byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n" +
		"ipvs:\n  schedular: sh\nudpIdleTimeout: 250ms\niptables:\n  syncPeriod: 10s\n  masqueradeAll: true\nconntrack:\n  maxPerCore: 0\n" +
		"portRange: 30000-32767\n"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(f.Unknown)
	if !slices.Equal(f.Unknown, []string{"ipvs.schedular", "udpIdleTimeout"}) {
		t.Errorf("unknown %v", f.Unknown)
	}
	if !slices.Equal(f.Ignored, []string{"iptables.syncPeriod", "portRange"}) {
		t.Errorf("ignored %v: iptables.masqueradeAll applies to IPVS mode", f.Ignored)
	}
	fl := newFlags(nil, "masquerade-all", "conntrack-max-per-core")
	err = f.Apply(fl)
	if err != nil || fl.get("masquerade-all") != "true" || fl.get("conntrack-max-per-core") != "0" {
		t.Errorf("masquerade-all %q, conntrack-max-per-core %q (0 given: leave the table), %v",
			fl.get("masquerade-all"), fl.get("conntrack-max-per-core"), err)
	}
}

func TestFeatureGates(t *testing.T) {
	gates, err := ParseFeatureGates(" B=false, A=true ,")
	if err != nil || len(gates) != 2 || !gates["A"] || gates["B"] {
		t.Fatalf("parsed %v, %v", gates, err)
	}
	if got := FormatFeatureGates(gates); got != "A=true,B=false" {
		t.Errorf("formatted %q", got)
	}
	for _, bad := range []string{"A", "A=yes", "=true", "A=true,B"} {
		if _, err := ParseFeatureGates(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestInterfaceNames: what the kernel takes as an interface name, less
// what iptables-restore would read as more than a name.
func TestInterfaceNames(t *testing.T) {
	for _, c := range []struct {
		name   string
		prefix bool
		ok     bool
	}{
		{"cbr0", false, true},
		{"vxlan.calico", false, true},
		{"br-0123456789ab", false, true}, // 15 bytes
		{"br-0123456789abc", false, false},
		{"veth", true, true},
		{"kv", true, true},
		{"0123456789abcd", true, true}, // 14, and the '+'
		{"0123456789abcde", true, false},
		{"", false, false},
		{".", false, false},
		{"..", false, false},
		{"cbr0\n-A INPUT", false, false},
		{"cbr0\r", false, false},
		{"cb r0", false, false},
		{"cb\tr0", false, false},
		{"cb\u00a0", false, false},
		{"cb\x01", false, false},
		{"eth0/1", false, false},
		{"eth0:1", false, false},
		{`cb"r0`, true, false},
		{"cb'r0", true, false},
		{`cb\r0`, true, false},
		{"!cbr0", false, false},
		{"-j", false, false},
		{"cali+", false, false}, // a wildcard, not the bridge
		{"cali+", true, true},
	} {
		if err := InterfaceName(c.name, c.prefix); (err == nil) != c.ok {
			t.Errorf("%q (prefix %v): %v, want ok %v", c.name, c.prefix, err, c.ok)
		}
	}
}
