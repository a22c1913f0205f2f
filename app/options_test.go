package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxyconfig"
)

// upstreamV134Flags are the flags `kube-proxy --help` of v1.34 lists.
const upstreamV134Flags = `bind-address bind-address-hard-fail boot-id-file cleanup cluster-cidr config
config-sync-period conntrack-max-per-core conntrack-min conntrack-tcp-be-liberal conntrack-tcp-timeout-close-wait
conntrack-tcp-timeout-established conntrack-udp-timeout conntrack-udp-timeout-stream detect-local-mode feature-gates
healthz-bind-address hostname-override init-only iptables-localhost-nodeports iptables-masquerade-bit
iptables-min-sync-period iptables-sync-period ipvs-exclude-cidrs ipvs-min-sync-period ipvs-scheduler ipvs-strict-arp
ipvs-sync-period ipvs-tcp-timeout ipvs-tcpfin-timeout ipvs-udp-timeout kube-api-burst kube-api-content-type
kube-api-qps kubeconfig log-flush-frequency log-json-info-buffer-size log-json-split-stream log-text-info-buffer-size
log-text-split-stream logging-format machine-id-file masquerade-all master metrics-bind-address nodeport-addresses
oom-score-adj pod-bridge-interface pod-interface-name-prefix profiling proxy-mode show-hidden-metrics-for-version v
version vmodule write-config-to`

// TestEveryUpstreamFlagIsAccepted: a manifest written for kube-proxy v1.34
// names no flag the proxier would refuse as unknown.
func TestEveryUpstreamFlagIsAccepted(t *testing.T) {
	have := map[string]bool{}
	for _, f := range Flags() {
		for _, n := range f.Names() {
			have[n] = true
		}
	}
	names := strings.Fields(upstreamV134Flags)
	if len(names) != 56 {
		t.Fatalf("%d upstream flags listed, want 56", len(names))
	}
	for _, n := range names {
		if !have[n] {
			t.Errorf("--%s is not accepted", n)
		}
	}
}

// TestUpstreamFlagsParse: a kubeadm-style command line with flags of every
// kind parses, and the effective configuration written from it holds them.
func TestUpstreamFlagsParse(t *testing.T) {
	out := filepath.Join(t.TempDir(), "effective.yaml")
	app := &cli.App{Flags: Flags(), Action: func(c *cli.Context) error {
		o, err := NewOptions(c)
		if err != nil {
			return err
		}
		return proxyconfig.Write(o.WriteConfigTo, o.Effective)
	}}
	args := []string{"kube-proxy", "--hostname-override=node-1", "--conntrack-max-per-core=0",
		"--feature-gates=KubeProxyIPVS=true", "--iptables-localhost-nodeports=false", "--kube-api-qps=50", "--v=2",
		"--vmodule=proxier=4", "--ipvs-exclude-cidrs=10.0.0.0/8,192.168.0.0/16", "--bind-address=10.0.2.15",
		"--show-hidden-metrics-for-version=1.33", "--write-config-to=" + out}
	if err := app.Run(args); err != nil {
		t.Fatal(err)
	}
	f, err := proxyconfig.Load(out)
	if err != nil {
		t.Fatalf("what --write-config-to wrote does not load: %v", err)
	}
	c := f.Config
	if c.HostnameOverride != "node-1" || *c.Conntrack.MaxPerCore != 0 || c.ClientConnection.QPS != 50 ||
		len(c.IPVS.ExcludeCIDRs) != 2 || c.IPVS.SyncPeriod.Duration != 30*time.Second || len(f.Unknown) != 0 ||
		c.BindAddress != "10.0.2.15" || !c.FeatureGates["KubeProxyIPVS"] || c.ShowHiddenMetricsForVersion != "1.33" {
		t.Errorf("written configuration %+v, unknown %v", c, f.Unknown)
	}
}

// TestUpstreamFlagChecks: the values of flags that are ignored are still
// checked, as upstream does, and --bind-address is an address.
func TestUpstreamFlagChecks(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the error; "" for none
	}{
		{[]string{"--feature-gates=KubeProxyIPVS=true,APIServingWithRoutine=true", "--show-hidden-metrics-for-version=1.33"}, ""},
		{[]string{"--feature-gates=KubeProxyIPVS"}, "--feature-gates"},
		{[]string{"--feature-gates=KubeProxyIPVS=maybe"}, "--feature-gates"},
		// As kube-proxy v1.37: a gate it does not know, or no longer knows
		// (v1.34 had LoadBalancerIPMode, locked), is refused, and so is a
		// locked one set against its default.
		{[]string{"--feature-gates=NoSuchGate=true"}, "unrecognized feature gate: NoSuchGate"},
		{[]string{"--feature-gates=LoadBalancerIPMode=true"}, "unrecognized feature gate: LoadBalancerIPMode"},
		{[]string{"--feature-gates=PreferSameTrafficDistribution=true"}, ""},
		{[]string{"--feature-gates=PreferSameTrafficDistribution=false"}, "cannot set feature gate PreferSameTrafficDistribution to false, feature is locked to true"},
		{[]string{"--feature-gates=KubeProxyIPVS=false"}, ""},
		{[]string{"--show-hidden-metrics-for-version=v1.33"}, "--show-hidden-metrics-for-version"},
		{[]string{"--show-hidden-metrics-for-version=1"}, "--show-hidden-metrics-for-version"},
		{[]string{"--detect-local-mode=BridgeInterface", "--pod-bridge-interface=cbr0\n-I INPUT -j ACCEPT"}, "--pod-bridge-interface"},
		{[]string{"--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=veth\""}, "--pod-interface-name-prefix"},
		{[]string{"--detect-local-mode=InterfaceNamePrefix", "--pod-interface-name-prefix=veth"}, ""},
	} {
		_, err := options(c.args...)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: error %v, want one naming %q", c.args, err, c.want)
		}
	}
	for in, want := range map[string]string{"": "invalid IP", "0.0.0.0": "invalid IP", "::": "invalid IP",
		"10.0.2.15": "10.0.2.15", "fd00::15": "fd00::15", "::ffff:10.0.2.15": "10.0.2.15"} {
		if got, err := primaryOverride(in); err != nil || got.String() != want {
			t.Errorf("--bind-address=%q: %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := options("--bind-address=node-1"); err == nil || !strings.Contains(err.Error(), "--bind-address") {
		t.Errorf("--bind-address=node-1: error %v", err)
	}
}

// TestAllowServiceExternalIPsGate: the one feature gate that changes what
// kube-proxy v1.37's IPVS mode programs is applied (a config file's
// featureGates reaches it through the flag).
func TestAllowServiceExternalIPsGate(t *testing.T) {
	for gates, ignore := range map[string]bool{"": false, "AllowServiceExternalIPs=true": false,
		"AllowServiceExternalIPs=false": true, "KubeProxyIPVS=true,AllowServiceExternalIPs=false": true} {
		o, err := options("--feature-gates=" + gates)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Proxier.Desired.IgnoreExternalIPs; got != ignore {
			t.Errorf("--feature-gates=%s: external IPs ignored %v, want %v", gates, got, ignore)
		}
	}
}

// options reads the command line args as the command does.
func options(args ...string) (*Options, error) {
	var o *Options
	app := &cli.App{Flags: Flags(), Action: func(c *cli.Context) (err error) {
		o, err = NewOptions(c)
		return err
	}}
	err := app.Run(append([]string{"kube-ipvs-proxy", "--hostname-override=n"}, args...))
	return o, err
}

// TestEveryErrorNamesItsField: each bad value is reported, all at once,
// by the flag given, or by the --config field it came from.
func TestEveryErrorNamesItsField(t *testing.T) {
	_, err := options("--ipvs-sync-period=0s", "--iptables-masquerade-bit=40", "--cluster-cidr=10.0.0.0/33",
		"--detect-local-mode=Nope", "--ipvs-scheduler=fastest", "--oom-score-adj=5000", "--ipvs-udp-timeout=-1s")
	for _, want := range []string{"--ipvs-sync-period: 0s", "--iptables-masquerade-bit: 40", `--cluster-cidr: invalid CIDR "10.0.0.0/33"`,
		`--detect-local-mode: "Nope"`, `--ipvs-scheduler: "fastest"`, "--oom-score-adj: 5000", "--ipvs-udp-timeout: -1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant it to hold %q", err, want)
		}
	}
	conf := filepath.Join(t.TempDir(), "config.yaml")
	body := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nipvs:\n  minSyncPeriod: 1h\n"
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = options("--config", conf)
	if err == nil || !strings.Contains(err.Error(), "--config field ipvs.minSyncPeriod: 1h0m0s: must be between 0 and the sync period") {
		t.Errorf("error %v, want it to name the file's field", err)
	}
	if _, err = options("--config", conf, "--ipvs-min-sync-period=2s"); err != nil {
		t.Errorf("a flag over the file's field: %v", err)
	}
}

func TestModulesLoadedOrBuiltIn(t *testing.T) {
	dir := t.TempDir()
	sys := filepath.Join(dir, "module")
	if err := os.MkdirAll(filepath.Join(sys, "ip_vs"), 0o755); err != nil {
		t.Fatal(err)
	}
	builtin := filepath.Join(dir, "modules.builtin")
	if err := os.WriteFile(builtin, []byte("kernel/net/netfilter/ipvs/ip_vs_rr.ko\nkernel/net/netfilter/ipset/ip_set.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := moduleSource{sysModule: sys, builtin: builtin}
	for m, want := range map[string]bool{"ip_vs": true, "ip_vs_rr": true, "ip_set": true, "ip_vs_sh": false, "dummy": false} {
		if got := s.available(m); got != want {
			t.Errorf("%s available %v, want %v", m, got, want)
		}
	}
	// modprobe cannot load anything from this source's point of view: the
	// refusal names what is missing and how to load it.
	err := requireModules(zap.NewNop(), s, "sh")
	if err == nil || !strings.Contains(err.Error(), "ip_vs_sh, dummy") || !strings.Contains(err.Error(), "modprobe ip_vs_sh dummy") {
		t.Errorf("error %v", err)
	}
	if err := requireModules(zap.NewNop(), moduleSource{sysModule: sys, builtin: builtin + ".none"}, "rr"); err == nil {
		t.Error("no ip_vs_rr, yet no refusal")
	}
}

// TestNodePortAddressKeywords: --nodeport-addresses takes kube-proxy
// v1.37's keywords mixed with CIDRs, each keyword once, and says what is
// wrong in v1.37's words.
func TestNodePortAddressKeywords(t *testing.T) {
	for _, c := range []struct {
		value   string
		primary bool
		cidrs   string
		err     string
	}{
		{"", false, "", ""},
		{"primary", true, "", ""},
		{"primary,10.0.0.0/8", true, "10.0.0.0/8", ""},
		{"localhost", false, "127.0.0.0/8 ::1/128", ""},
		{"all,primary", true, "0.0.0.0/0 ::/0", ""},
		{"10.0.2.0/24,localhost,fd00::/64", false, "10.0.2.0/24 fd00::/64 127.0.0.0/8 ::1/128", ""},
		{"primary,10.0.0.0/8,primary", false, "", `NodePortAddresses[2]: Duplicate value: "primary"`},
		{"nodes", false, "", `NodePortAddresses[0]: Invalid value: "nodes": must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'`},
		{"10.0.0.0/8,10.0.0.1", false, "", `NodePortAddresses[1]: Invalid value: "10.0.0.1"`},
	} {
		o, err := options("--nodeport-addresses=" + c.value)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.value, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.value, err)
			continue
		}
		var cidrs []string
		for _, p := range o.Proxier.NodePortAddresses {
			cidrs = append(cidrs, p.String())
		}
		if o.Proxier.NodePortPrimary != c.primary || strings.Join(cidrs, " ") != c.cidrs {
			t.Errorf("%q: primary %v, CIDRs %v; want %v, %s", c.value, o.Proxier.NodePortPrimary, cidrs, c.primary, c.cidrs)
		}
	}
}

// IPv6 is the node's when the kernel has it and it is not disabled, as
// kube-proxy v1.37 decides (v1.34 looked at the first only).
func TestIPv6EnabledAsUpstream(t *testing.T) {
	for _, c := range []struct {
		inet6   bool
		disable string // "" for no such file
		want    bool
	}{{false, "", false}, {true, "", true}, {true, "0\n", true}, {true, "1\n", false}} {
		proc := t.TempDir()
		if c.inet6 {
			mustWrite(t, filepath.Join(proc, "net/if_inet6"), "")
		}
		if c.disable != "" {
			mustWrite(t, filepath.Join(proc, "sys/net/ipv6/conf/all/disable_ipv6"), c.disable)
		}
		if got := ipv6Enabled(proc); got != c.want {
			t.Errorf("if_inet6 %v, disable_ipv6 %q: IPv6 %v, want %v", c.inet6, c.disable, got, c.want)
		}
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVIPMode: addresses by default, local-route on request, anything else
// refused by name.
func TestVIPMode(t *testing.T) {
	for args, want := range map[string]bool{"": false, "--ipvs-vip-mode=addresses": false, "--ipvs-vip-mode=local-route": true} {
		var list []string
		if args != "" {
			list = []string{args}
		}
		o, err := options(list...)
		if err != nil {
			t.Fatal(err)
		}
		if o.Proxier.LocalRoutes != want {
			t.Errorf("%q: local routes %v, want %v", args, o.Proxier.LocalRoutes, want)
		}
	}
	if _, err := options("--ipvs-vip-mode=route"); err == nil || !strings.Contains(err.Error(), "ipvs-vip-mode") {
		t.Errorf("--ipvs-vip-mode=route: %v, want an error naming the flag", err)
	}
}
