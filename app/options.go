package app

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kube-proxy/config/v1alpha1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxyconfig"
)

// Options is everything a run needs, read once from the command line and
// --config: the flags' defaults, then the file, then the flags given.
type Options struct {
	// ShowVersion is --version: nothing else is read.
	ShowVersion bool
	// File is --config, nil without one; Effective is the configuration
	// in force, for /configz and --write-config-to.
	File      *proxyconfig.File
	Effective *v1alpha1.KubeProxyConfiguration
	// Flags are every flag's value in force, for /flagz; Started is when
	// the options were read, for /statusz.
	Flags   map[string]string
	Started time.Time

	Proxier proxier.Config
	Kernel  KernelSettings
	Client  ClientOptions

	HealthzAddress, MetricsAddress string // empty: not served
	BindAddressHardFail            bool
	Profiling                      bool
	// DebugStateRemote answers /debug/state to clients off the node too.
	DebugStateRemote bool
	// IPVSStats exports the IPVS statistics as metrics (--ipvs-stats).
	IPVSStats        bool
	ConfigSyncPeriod time.Duration // informer resync
	Verbosity        int
	LoggingFormat    string
	VModule          string // klog's pattern=N list, for the Debug lines
	OOMScoreAdj      int

	// One-shot actions: each does its part and exits.
	Cleanup, InitOnly bool
	WriteConfigTo     string

	// ignored are what was given but changes nothing, told once the
	// logger exists: flags of other modes, feature gates, and
	// --show-hidden-metrics-for-version.
	ignoredFlags      []string
	ignoredGates      map[string]bool
	showHiddenMetrics bool
}

// ClientOptions are how the apiserver is reached.
type ClientOptions struct {
	Kubeconfig, Master              string // both empty: in-cluster
	ContentType, AcceptContentTypes string
	QPS                             float32
	Burst                           int
}

// KernelSettings are the node-wide settings made once at start-up.
type KernelSettings struct {
	IPv6      bool   // the node has IPv6: ip6tables is needed too
	Scheduler string // the node's, whose module must be there
	StrictARP bool
	Timeouts  ipvs.Timeouts
	Conntrack conntrack.Settings
}

// NewOptions reads c: --config fills in the flags the command line left
// unset, then every value is parsed and checked. The error lists every
// problem, each naming its flag, or the field of --config it came from.
func NewOptions(c *cli.Context) (*Options, error) {
	if c.Bool("version") {
		return &Options{ShowVersion: true}, nil
	}
	o := &Options{}
	if path := c.String("config"); path != "" {
		f, err := proxyconfig.Load(path)
		if err != nil {
			return nil, err
		}
		if err := f.Apply(c); err != nil {
			return nil, err
		}
		o.File = f
	}
	r := reader{c: c, file: o.File}
	o.readProxier(&r)
	o.readKernel(&r)
	o.Client = ClientOptions{Kubeconfig: c.String("kubeconfig"), Master: c.String("master"),
		ContentType: c.String("kube-api-content-type"), AcceptContentTypes: c.String("kube-api-accept-content-types"),
		QPS: float32(c.Float64("kube-api-qps")), Burst: c.Int("kube-api-burst")}
	o.HealthzAddress, o.MetricsAddress = c.String("healthz-bind-address"), c.String("metrics-bind-address")
	o.BindAddressHardFail, o.Profiling = c.Bool("bind-address-hard-fail"), c.Bool("profiling")
	o.DebugStateRemote, o.IPVSStats = c.Bool("debug-state-remote"), c.Bool("ipvs-stats")
	if o.ConfigSyncPeriod = c.Duration("config-sync-period"); o.ConfigSyncPeriod <= 0 {
		r.fail("config-sync-period", "%s: must be greater than 0", o.ConfigSyncPeriod)
	}
	o.Verbosity, o.LoggingFormat, o.VModule = c.Int("v"), c.String("logging-format"), c.String("vmodule")
	if o.LoggingFormat != "text" && o.LoggingFormat != "json" {
		r.fail("logging-format", "%q: one of text, json", o.LoggingFormat)
	}
	if _, err := parseVModule(o.VModule); err != nil {
		r.fail("vmodule", "%v", err)
	}
	if o.OOMScoreAdj = c.Int("oom-score-adj"); o.OOMScoreAdj < -1000 || o.OOMScoreAdj > 1000 {
		r.fail("oom-score-adj", "%d: must be within [-1000, 1000]", o.OOMScoreAdj)
	}
	o.Cleanup, o.InitOnly, o.WriteConfigTo = c.Bool("cleanup"), c.Bool("init-only"), c.String("write-config-to")
	if v := c.String("show-hidden-metrics-for-version"); v != "" {
		o.showHiddenMetrics = true
		if !majorMinor(v) {
			r.fail("show-hidden-metrics-for-version", "%q: not a MAJOR.MINOR version", v)
		}
	}
	for _, n := range ignoredFlags {
		if c.IsSet(n) {
			o.ignoredFlags = append(o.ignoredFlags, "--"+n)
		}
	}
	if len(r.errs) > 0 {
		return nil, errors.Join(r.errs...)
	}
	o.Effective = proxyconfig.Effective(c)
	o.Flags, o.Started = flagValues(c), time.Now()
	return o, nil
}

// readProxier reads what the proxier is configured with.
func (o *Options) readProxier(r *reader) {
	c, cfg := r.c, &o.Proxier
	if mode := c.String("proxy-mode"); mode != "ipvs" {
		r.fail("proxy-mode", "%q is not supported: kube-ipvs-proxy only implements 'ipvs'", mode)
	}
	cfg.Desired.Scheduler = cmp.Or(c.String("ipvs-scheduler"), desired.DefaultScheduler)
	if !slices.Contains(desired.Schedulers, cfg.Desired.Scheduler) {
		r.fail("ipvs-scheduler", "%q: unknown scheduler (one of %s)", cfg.Desired.Scheduler, strings.Join(desired.Schedulers, ", "))
	}
	cfg.SyncPeriod, cfg.MinSyncPeriod = c.Duration("ipvs-sync-period"), c.Duration("ipvs-min-sync-period")
	if cfg.SyncPeriod <= 0 {
		r.fail("ipvs-sync-period", "%s: must be greater than 0", cfg.SyncPeriod)
	}
	if cfg.MinSyncPeriod < 0 || cfg.SyncPeriod > 0 && cfg.MinSyncPeriod > cfg.SyncPeriod {
		r.fail("ipvs-min-sync-period", "%s: must be between 0 and the sync period", cfg.MinSyncPeriod)
	}
	cfg.Glue.ClusterCIDRs = r.prefixes("cluster-cidr", []string{c.String("cluster-cidr")})
	o.readDetectLocal(r)
	cfg.ExcludeCIDRs = r.prefixes("ipvs-exclude-cidrs", c.StringSlice("ipvs-exclude-cidrs"))
	switch m := c.String("ipvs-vip-mode"); m {
	case "addresses":
	case "local-route":
		cfg.LocalRoutes = true
	default:
		r.fail("ipvs-vip-mode", "%q: one of addresses, local-route", m)
	}
	cfg.NodePortPrimary, cfg.NodePortAddresses = r.nodePortAddresses(c.StringSlice("nodeport-addresses"))
	var err error
	if cfg.PrimaryOverride, err = primaryOverride(c.String("bind-address")); err != nil {
		r.fail("bind-address", "%v", err)
	}
	o.readFeatureGates(r)
	for _, s := range c.StringSlice("critical-services") {
		ns, name, ok := strings.Cut(strings.TrimSpace(s), "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			r.fail("critical-services", "%q is not namespace/name", s)
			continue
		}
		cfg.CriticalServices = append(cfg.CriticalServices, types.NamespacedName{Namespace: ns, Name: name})
	}
	cfg.Glue.MasqueradeAll = c.Bool("masquerade-all")
	if cfg.Glue.MasqueradeBit = c.Int("iptables-masquerade-bit"); cfg.Glue.MasqueradeBit < 0 || cfg.Glue.MasqueradeBit > 31 {
		r.fail("iptables-masquerade-bit", "%d: must be within [0, 31]", cfg.Glue.MasqueradeBit)
	}
	name := c.String("hostname-override")
	if name == "" {
		if name, err = os.Hostname(); err != nil {
			r.fail("hostname-override", "not given, and no hostname: %v", err)
		}
	}
	cfg.Desired.NodeName = strings.ToLower(strings.TrimSpace(name))
	cfg.Desired.IPv6Capable = ipv6Enabled("/proc")
}

// readDetectLocal reads --detect-local-mode and the interface it needs.
func (o *Options) readDetectLocal(r *reader) {
	c, g := r.c, &o.Proxier.Glue
	g.DetectLocal = c.String("detect-local-mode")
	need := ""
	switch g.DetectLocal {
	case "", glue.DetectClusterCIDR, glue.DetectNodeCIDR:
	case glue.DetectBridgeInterface:
		need = "pod-bridge-interface"
	case glue.DetectInterfaceNamePrefix:
		need = "pod-interface-name-prefix"
	default:
		r.fail("detect-local-mode", "%q: unknown mode (one of %s, %s, %s, %s)", g.DetectLocal,
			glue.DetectClusterCIDR, glue.DetectNodeCIDR, glue.DetectBridgeInterface, glue.DetectInterfaceNamePrefix)
	}
	if need != "" {
		if g.LocalInterface = c.String(need); g.LocalInterface == "" {
			r.fail("detect-local-mode", "%s needs %s", g.DetectLocal, r.name(need))
		}
	}
	// Either reaches iptables-restore's input; a newline would add a rule.
	for _, flag := range []string{"pod-bridge-interface", "pod-interface-name-prefix"} {
		if v := c.String(flag); v != "" {
			if err := proxyconfig.InterfaceName(v, flag == "pod-interface-name-prefix"); err != nil {
				r.fail(flag, "%q: %v", v, err)
			}
		}
	}
}

// upstreamGate is one of kube-proxy's feature gates (featuregates.go).
type upstreamGate struct{ Default, Locked bool }

// readFeatureGates checks --feature-gates as kube-proxy v1.37 does: a gate
// it does not know (one it removed, too) is refused, and so is a locked
// gate set against its default, in its words. Of the rest, one changes
// what we program: AllowServiceExternalIPs. KubeProxyIPVS, deprecated
// in v1.37, is accepted: we are what it is being replaced by.
func (o *Options) readFeatureGates(r *reader) {
	gates, err := proxyconfig.ParseFeatureGates(r.c.String("feature-gates"))
	if err != nil {
		r.fail("feature-gates", "%v", err)
		return
	}
	for _, name := range slices.Sorted(maps.Keys(gates)) {
		g, known := upstreamGates[name]
		switch {
		case !known:
			r.fail("feature-gates", "unrecognized feature gate: %s (kube-proxy %s does not know it)", name, upstreamGatesVersion)
		case g.Locked && gates[name] != g.Default:
			r.fail("feature-gates", "cannot set feature gate %s to %v, feature is locked to %v", name, gates[name], g.Default)
		}
	}
	if on, set := gates[externalIPsGate]; set && !on {
		o.Proxier.Desired.IgnoreExternalIPs = true
	}
	delete(gates, externalIPsGate)
	o.ignoredGates = gates
}

const externalIPsGate = "AllowServiceExternalIPs"

// readKernel reads the node-wide kernel settings.
func (o *Options) readKernel(r *reader) {
	c := r.c
	k := KernelSettings{IPv6: o.Proxier.Desired.IPv6Capable, Scheduler: o.Proxier.Desired.Scheduler, StrictARP: c.Bool("ipvs-strict-arp"),
		Timeouts: ipvs.Timeouts{TCP: c.Duration("ipvs-tcp-timeout"), TCPFin: c.Duration("ipvs-tcpfin-timeout"), UDP: c.Duration("ipvs-udp-timeout")},
		Conntrack: conntrack.Settings{MaxPerCore: c.Int("conntrack-max-per-core"), Min: c.Int("conntrack-min"),
			TCPEstablished: c.Duration("conntrack-tcp-timeout-established"), TCPCloseWait: c.Duration("conntrack-tcp-timeout-close-wait"),
			UDP: c.Duration("conntrack-udp-timeout"), UDPStream: c.Duration("conntrack-udp-timeout-stream"), TCPBeLiberal: c.Bool("conntrack-tcp-be-liberal")}}
	for _, name := range []string{"ipvs-tcp-timeout", "ipvs-tcpfin-timeout", "ipvs-udp-timeout", "conntrack-tcp-timeout-established",
		"conntrack-tcp-timeout-close-wait", "conntrack-udp-timeout", "conntrack-udp-timeout-stream"} {
		if d := c.Duration(name); d < 0 {
			r.fail(name, "%s: must be 0 or more", d)
		}
	}
	for _, name := range []string{"conntrack-max-per-core", "conntrack-min"} {
		if n := c.Int(name); n < 0 {
			r.fail(name, "%d: must be 0 or more", n)
		}
	}
	o.Kernel = k
}

// reader reads flag values and collects what is wrong with them, each
// problem naming where its value came from.
type reader struct {
	c    *cli.Context
	file *proxyconfig.File
	errs []error
}

// name is how the operator gave flag: on the command line, or as a field
// of --config.
func (r *reader) name(flag string) string {
	if r.file != nil {
		if field, ok := r.file.From[flag]; ok {
			return "--config field " + field
		}
	}
	return "--" + flag
}

// fail records a problem with flag's value.
func (r *reader) fail(flag, format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf("%s: %s", r.name(flag), fmt.Sprintf(format, args...)))
}

// prefixes parses flag's CIDRs, each of list possibly comma separated.
func (r *reader) prefixes(flag string, list []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range list {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			p, err := netip.ParsePrefix(part)
			if err != nil {
				r.fail(flag, "invalid CIDR %q", part)
				continue
			}
			out = append(out, p.Masked())
		}
	}
	return out
}

// ipv6Enabled says whether the kernel under proc has IPv6, as kube-proxy
// v1.37 decides it: the module is there (net/if_inet6) and not disabled
// (net.ipv6.conf.all.disable_ipv6 is not 1).
func ipv6Enabled(proc string) bool {
	if _, err := os.Stat(filepath.Join(proc, "net/if_inet6")); err != nil {
		return false
	}
	off, err := os.ReadFile(filepath.Join(proc, "sys/net/ipv6/conf/all/disable_ipv6"))
	return err != nil || strings.TrimSpace(string(off)) != "1"
}

// nodePortAddresses reads --nodeport-addresses as kube-proxy v1.37 does:
// CIDRs mixed with the keywords 'primary' (the Node's primary address of
// each family), 'localhost' (127.0.0.0/8 and ::1/128, which in IPVS mode
// serve no NodePort) and 'all' (0.0.0.0/0 and ::/0), each keyword at most
// once, with v1.37's messages.
func (r *reader) nodePortAddresses(list []string) (primary bool, cidrs []netip.Prefix) {
	seen := map[string]bool{}
	i := 0
	for _, s := range list {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			switch part {
			case "primary", "localhost", "all":
				if seen[part] {
					r.fail("nodeport-addresses", "NodePortAddresses[%d]: Duplicate value: %q", i, part)
				}
				seen[part] = true
			default:
				p, err := netip.ParsePrefix(part)
				if err != nil {
					r.fail("nodeport-addresses", "NodePortAddresses[%d]: Invalid value: %q: must be a valid CIDR or one of the keywords 'primary', 'localhost', 'all'", i, part)
				} else {
					cidrs = append(cidrs, p.Masked())
				}
			}
			i++
		}
	}
	if seen["localhost"] {
		cidrs = append(cidrs, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
	}
	if seen["all"] {
		cidrs = append(cidrs, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))
	}
	return seen["primary"], cidrs
}

// primaryOverride reads --bind-address: an address other than 0.0.0.0 or
// :: is the node's primary address of its family.
func primaryOverride(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%q: not an IP address", s)
	}
	if a.IsUnspecified() {
		return netip.Addr{}, nil
	}
	return a.Unmap(), nil
}

// majorMinor says whether v is MAJOR.MINOR, as upstream checks
// --show-hidden-metrics-for-version.
func majorMinor(v string) bool {
	major, minor, ok := strings.Cut(v, ".")
	_, errMajor := strconv.ParseUint(major, 10, 32)
	_, errMinor := strconv.ParseUint(minor, 10, 32)
	return ok && errMajor == nil && errMinor == nil
}
