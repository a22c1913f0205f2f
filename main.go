// Command kube-ipvs-proxy is a drop-in replacement for kube-proxy in IPVS
// mode. This file only parses flags and wires the packages together.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	kevents "github.com/kube-ipvs-proxy/kube-ipvs-proxy/events"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/informers"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeclient"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxyconfig"
)

// defaultCritical are the Services node agents need first: the apiserver and
// cluster DNS.
var defaultCritical = []string{"default/kubernetes", "kube-system/kube-dns"}

var schedulers = desired.Schedulers

func flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "a KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1); flags given on the command line win"},
		&cli.StringFlag{Name: "kubeconfig", Usage: "path to a kubeconfig file (in-cluster config when empty)"},
		&cli.StringFlag{Name: "master", Usage: "address of the Kubernetes API server (overrides the kubeconfig)"},
		&cli.StringFlag{Name: "hostname-override", Usage: "name of this node's Node object (default: the hostname)"},
		&cli.StringFlag{Name: "proxy-mode", Aliases: []string{"mode"}, Value: "ipvs", Usage: "proxy mode; only 'ipvs' is supported"},
		&cli.StringFlag{Name: "ipvs-scheduler", Usage: "IPVS scheduler: " + strings.Join(schedulers, ", ") + " (empty means rr)"},
		&cli.DurationFlag{Name: "ipvs-sync-period", Value: 30 * time.Second, Usage: "how often a full sync re-reads the kernel and repairs drift (> 0)"},
		&cli.DurationFlag{Name: "ipvs-min-sync-period", Value: time.Second, Usage: "minimum time between syncs; 0 syncs on every change"},
		&cli.StringSliceFlag{Name: "ipvs-exclude-cidrs", Usage: "CIDRs whose virtual servers are never deleted"},
		&cli.BoolFlag{Name: "ipvs-strict-arp", Usage: "set arp_ignore=1 and arp_announce=2 on all links, so kube-ipvs0's addresses are never claimed on the node's network"},
		&cli.DurationFlag{Name: "ipvs-tcp-timeout", Usage: "IPVS timeout of idle established TCP connections; 0 leaves the kernel's (900s)"},
		&cli.DurationFlag{Name: "ipvs-tcpfin-timeout", Usage: "IPVS timeout of TCP connections after a FIN; 0 leaves the kernel's (120s)"},
		&cli.DurationFlag{Name: "ipvs-udp-timeout", Usage: "IPVS timeout of UDP flows; 0 leaves the kernel's (300s)"},
		&cli.StringSliceFlag{Name: "nodeport-addresses",
			Usage: "CIDRs of the node addresses NodePorts are served on, or 'primary' for the Node's primary address (default: every address)"},
		&cli.StringFlag{Name: "cluster-cidr", Usage: "pod CIDR(s), comma separated; traffic to cluster IPs from outside them is masqueraded"},
		&cli.StringFlag{Name: "detect-local-mode", Usage: "how pods' own traffic is told apart, exempt from masquerading: ClusterCIDR (default), NodeCIDR, BridgeInterface, InterfaceNamePrefix"},
		&cli.StringFlag{Name: "pod-bridge-interface", Usage: "the pods' bridge, with --detect-local-mode=BridgeInterface"},
		&cli.StringFlag{Name: "pod-interface-name-prefix", Usage: "the prefix of pods' interface names, with --detect-local-mode=InterfaceNamePrefix"},
		&cli.BoolFlag{Name: "masquerade-all", Usage: "masquerade all traffic sent to cluster IPs"},
		&cli.IntFlag{Name: "iptables-masquerade-bit", Value: 14, Usage: "fwmark bit marking packets for SNAT [0, 31]"},
		&cli.StringFlag{Name: "healthz-bind-address", Value: "0.0.0.0:10256", Usage: "address:port of the health server; empty disables"},
		&cli.StringFlag{Name: "metrics-bind-address", Value: "127.0.0.1:10249", Usage: "address:port of the metrics server; empty disables"},
		&cli.BoolFlag{Name: "bind-address-hard-fail", Usage: "exit if the health or metrics server cannot bind"},
		&cli.DurationFlag{Name: "config-sync-period", Value: 15 * time.Minute, Usage: "informer resync period (> 0)"},
		&cli.StringSliceFlag{Name: "critical-services", Value: cli.NewStringSlice(defaultCritical...),
			Usage: "namespace/name of Services programmed before all others (kube-ipvs-proxy only)"},
		&cli.BoolFlag{Name: "profiling", Usage: "serve Go's pprof profiles under /debug/pprof/ on the metrics address"},
		&cli.IntFlag{Name: "v", Aliases: []string{"verbosity"}, Usage: "log verbosity; 4 and above logs every sync"},
	}, upstreamFlags()...)
}

func main() {
	app := &cli.App{
		Name:   "kube-ipvs-proxy",
		Usage:  "Kubernetes service proxy on IPVS, a drop-in for kube-proxy --proxy-mode=ipvs",
		Flags:  flags(),
		Action: run,
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "kube-ipvs-proxy:", err)
		os.Exit(1)
	}
}

func parsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			p, err := netip.ParsePrefix(part)
			if err != nil {
				return nil, fmt.Errorf("invalid CIDR %q: %w", part, err)
			}
			out = append(out, p.Masked())
		}
	}
	return out, nil
}

// config validates the flags into the proxier's configuration.
func config(c *cli.Context) (proxier.Config, error) {
	var cfg proxier.Config
	if mode := c.String("proxy-mode"); mode != "ipvs" {
		return cfg, fmt.Errorf("--proxy-mode=%q is not supported: kube-ipvs-proxy only implements 'ipvs'", mode)
	}
	cfg.Desired.Scheduler = c.String("ipvs-scheduler")
	if cfg.Desired.Scheduler != "" && !contains(schedulers, cfg.Desired.Scheduler) {
		return cfg, fmt.Errorf("--ipvs-scheduler=%q: unknown scheduler (one of %s)", cfg.Desired.Scheduler, strings.Join(schedulers, ", "))
	}
	cfg.SyncPeriod, cfg.MinSyncPeriod = c.Duration("ipvs-sync-period"), c.Duration("ipvs-min-sync-period")
	if cfg.SyncPeriod <= 0 {
		return cfg, fmt.Errorf("--ipvs-sync-period=%s: must be greater than 0", cfg.SyncPeriod)
	}
	if cfg.MinSyncPeriod < 0 || cfg.MinSyncPeriod > cfg.SyncPeriod {
		return cfg, fmt.Errorf("--ipvs-min-sync-period=%s: must be between 0 and --ipvs-sync-period", cfg.MinSyncPeriod)
	}
	if c.Duration("config-sync-period") <= 0 {
		return cfg, errors.New("--config-sync-period: must be greater than 0")
	}
	var err error
	if cfg.Glue.ClusterCIDRs, err = parsePrefixes([]string{c.String("cluster-cidr")}); err != nil {
		return cfg, fmt.Errorf("--cluster-cidr: %w", err)
	}
	if err := detectLocal(c, &cfg); err != nil {
		return cfg, err
	}
	if cfg.ExcludeCIDRs, err = parsePrefixes(c.StringSlice("ipvs-exclude-cidrs")); err != nil {
		return cfg, fmt.Errorf("--ipvs-exclude-cidrs: %w", err)
	}
	if cfg.NodePortAddresses, cfg.NodePortPrimary, err = parseNodePortAddresses(c.StringSlice("nodeport-addresses")); err != nil {
		return cfg, fmt.Errorf("--nodeport-addresses: %w", err)
	}
	if cfg.PrimaryOverride, err = primaryOverride(c.String("bind-address")); err != nil {
		return cfg, err
	}
	if err := featureGates(c, &cfg); err != nil {
		return cfg, err
	}
	for _, s := range c.StringSlice("critical-services") {
		ns, name, ok := strings.Cut(strings.TrimSpace(s), "/")
		if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return cfg, fmt.Errorf("--critical-services: %q is not namespace/name", s)
		}
		cfg.CriticalServices = append(cfg.CriticalServices, types.NamespacedName{Namespace: ns, Name: name})
	}
	cfg.Glue.MasqueradeAll = c.Bool("masquerade-all")
	cfg.Glue.MasqueradeBit = c.Int("iptables-masquerade-bit")
	if cfg.Glue.MasqueradeBit < 0 || cfg.Glue.MasqueradeBit > 31 {
		return cfg, fmt.Errorf("--iptables-masquerade-bit=%d: must be within [0, 31]", cfg.Glue.MasqueradeBit)
	}
	cfg.Desired.NodeName = c.String("hostname-override")
	if cfg.Desired.NodeName == "" {
		if cfg.Desired.NodeName, err = os.Hostname(); err != nil {
			return cfg, fmt.Errorf("hostname: %w", err)
		}
	}
	cfg.Desired.NodeName = strings.ToLower(strings.TrimSpace(cfg.Desired.NodeName))
	_, err = os.Stat("/proc/net/if_inet6")
	cfg.Desired.IPv6Capable = err == nil
	return cfg, nil
}

// detectLocal reads --detect-local-mode and the interface it needs.
func detectLocal(c *cli.Context, cfg *proxier.Config) error {
	cfg.Glue.DetectLocal = c.String("detect-local-mode")
	need := ""
	switch cfg.Glue.DetectLocal {
	case "", glue.DetectClusterCIDR, glue.DetectNodeCIDR:
	case glue.DetectBridgeInterface:
		need = "pod-bridge-interface"
	case glue.DetectInterfaceNamePrefix:
		need = "pod-interface-name-prefix"
	default:
		return fmt.Errorf("--detect-local-mode=%q: unknown mode (one of %s, %s, %s, %s)", cfg.Glue.DetectLocal,
			glue.DetectClusterCIDR, glue.DetectNodeCIDR, glue.DetectBridgeInterface, glue.DetectInterfaceNamePrefix)
	}
	if need != "" {
		if cfg.Glue.LocalInterface = c.String(need); cfg.Glue.LocalInterface == "" {
			return fmt.Errorf("--detect-local-mode=%s needs --%s", cfg.Glue.DetectLocal, need)
		}
	}
	// Either reaches iptables-restore's input; a newline would add a rule.
	for _, flag := range []string{"pod-bridge-interface", "pod-interface-name-prefix"} {
		if v := c.String(flag); v != "" {
			if err := proxyconfig.InterfaceName(v, flag == "pod-interface-name-prefix"); err != nil {
				return fmt.Errorf("--%s=%q: %w", flag, v, err)
			}
		}
	}
	return nil
}

// parseNodePortAddresses reads --nodeport-addresses: CIDRs, and the
// keyword "primary", as upstream.
func parseNodePortAddresses(list []string) ([]netip.Prefix, bool, error) {
	var cidrs []string
	primary := false
	for _, s := range list {
		for _, part := range strings.Split(s, ",") {
			if strings.TrimSpace(part) == "primary" {
				primary = true
			} else {
				cidrs = append(cidrs, part)
			}
		}
	}
	prefixes, err := parsePrefixes(cidrs)
	return prefixes, primary, err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func restConfig(c *cli.Context) (*rest.Config, error) {
	if c.String("kubeconfig") == "" && c.String("master") == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags(c.String("master"), c.String("kubeconfig"))
}

// kernelSettings are the node-wide IPVS settings made once at start-up.
type kernelSettings struct {
	ipv6      bool   // the node has IPv6: ip6tables is needed too
	scheduler string // the node's, whose module must be there
	strictARP bool
	timeouts  ipvs.Timeouts
	conntrack conntrack.Settings
}

func kernelConfig(c *cli.Context) (kernelSettings, error) {
	k := kernelSettings{scheduler: cmp.Or(c.String("ipvs-scheduler"), "rr"), strictARP: c.Bool("ipvs-strict-arp"), timeouts: ipvs.Timeouts{
		TCP: c.Duration("ipvs-tcp-timeout"), TCPFin: c.Duration("ipvs-tcpfin-timeout"), UDP: c.Duration("ipvs-udp-timeout")},
		conntrack: conntrack.Settings{MaxPerCore: c.Int("conntrack-max-per-core"), Min: c.Int("conntrack-min"),
			TCPEstablished: c.Duration("conntrack-tcp-timeout-established"), TCPCloseWait: c.Duration("conntrack-tcp-timeout-close-wait"),
			UDP: c.Duration("conntrack-udp-timeout"), UDPStream: c.Duration("conntrack-udp-timeout-stream"), TCPBeLiberal: c.Bool("conntrack-tcp-be-liberal")}}
	ct := k.conntrack
	for name, d := range map[string]time.Duration{"ipvs-tcp-timeout": k.timeouts.TCP, "ipvs-tcpfin-timeout": k.timeouts.TCPFin, "ipvs-udp-timeout": k.timeouts.UDP,
		"conntrack-tcp-timeout-established": ct.TCPEstablished, "conntrack-tcp-timeout-close-wait": ct.TCPCloseWait,
		"conntrack-udp-timeout": ct.UDP, "conntrack-udp-timeout-stream": ct.UDPStream} {
		if d < 0 {
			return k, fmt.Errorf("--%s=%s: must be 0 or more", name, d)
		}
	}
	for name, n := range map[string]int{"conntrack-max-per-core": ct.MaxPerCore, "conntrack-min": ct.Min} {
		if n < 0 {
			return k, fmt.Errorf("--%s=%d: must be 0 or more", name, n)
		}
	}
	return k, nil
}

// openKernel opens every kernel table, loading modules first where modprobe
// exists (in a container it usually does not, and the host must have them),
// and makes the node-wide settings. A timeout the kernel refuses is logged,
// not fatal, as upstream: the proxier works with the kernel's own.
func openKernel(log *zap.Logger, settings kernelSettings) (proxier.Kernel, error) {
	if err := requireModules(log, hostModules(), settings.scheduler); err != nil {
		return proxier.Kernel{}, err
	}
	k, err := proxier.NewKernel(settings.ipv6)
	if err != nil {
		return k, err
	}
	backend, why := iptables.Backend()
	log.Info("iptables backend", zap.String("backend", cmp.Or(backend, "the node's alternatives")), zap.String("why", why))
	if err := ipvs.ApplySysctls(ipvs.Sysctls(settings.strictARP)); err != nil {
		return k, err
	}
	if err := ipvs.SetTimeouts(settings.timeouts); err != nil {
		log.Error("IPVS timeouts not set; the kernel's stay", zap.Error(err))
	}
	setUpConntrack(log, settings.conntrack)
	return k, nil
}

// setUpConntrack sizes the conntrack table and sets its timeouts, as
// upstream does at start-up; a failure (a read-only /sys or /proc in a
// container) is one Warning, and the kernel's values stay.
func setUpConntrack(log *zap.Logger, ct conntrack.Settings) {
	cpus := runtime.NumCPU()
	if err := conntrack.GrowHashTable(ct.Max(cpus)); err != nil {
		log.Warn("conntrack hash table not grown", zap.Error(err))
	}
	if err := ipvs.ApplySysctls(ct.Sysctls(cpus)); err != nil {
		log.Warn("conntrack settings not applied", zap.Error(err))
	}
}

// serve runs an HTTP server on addr until ctx is done. A bind failure is
// fatal only with --bind-address-hard-fail, as in kube-proxy.
func serve(ctx context.Context, log *zap.Logger, name, addr string, hardFail bool, h http.Handler) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if hardFail {
			return fmt.Errorf("%s server on %s: %w", name, addr, err)
		}
		log.Error("cannot serve; continuing without it", zap.String("server", name), zap.String("address", addr), zap.Error(err))
		return nil
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("server stopped", zap.String("server", name), zap.Error(err))
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return nil
}

// steadyGCPercent is GOGC once the first sync is done. Go's default of 100
// lets the heap grow to twice what is live before collecting: at 10k
// Services ~110 MB live meant ~300 MB RSS. A node agent should be frugal,
// and between changes the proxier allocates little (the drift check's
// read), so collecting at 1.5x costs little CPU there. The cold start keeps
// 100: it allocates at a high rate (decoding every object), where a tighter
// GC means more collections for a peak that is returned right after anyway.
// GOGC and GOMEMLIMIT in the environment take precedence.
const steadyGCPercent = 50

// afterFirstSync returns the first sync's peak (the informers' lists, every
// Service computed at once) to the node now rather than over the runtime's
// slow scavenging, and tightens the GC for the steady state.
func afterFirstSync() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(steadyGCPercent)
	}
	debug.FreeOSMemory()
}

func run(c *cli.Context) error {
	if c.Bool("version") {
		fmt.Println("kube-ipvs-proxy", version())
		return nil
	}
	file, err := configFile(c)
	if err != nil {
		return err
	}
	cfg, err := config(c)
	if err != nil {
		return err
	}
	if err := checkUpstreamFlags(c); err != nil {
		return err
	}
	settings, err := kernelConfig(c)
	if err != nil {
		return err
	}
	cfg.AfterFirstSync = afterFirstSync
	log, err := newLogger(c.Int("v"), c.String("logging-format"))
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	routeKlog(log, c.Int("v"))
	// From here on an error is a log line like any other, so that a JSON
	// log stays JSON to its last line.
	if err := start(c, log, file, cfg, settings); err != nil {
		log.Error("kube-ipvs-proxy stopped", zap.Error(err))
		return cli.Exit("", 1)
	}
	return nil
}

// start runs the proxier, or the one-shot action a flag asks for, with the
// configuration run has checked.
func start(c *cli.Context, log *zap.Logger, file *proxyconfig.File, cfg proxier.Config, settings kernelSettings) error {
	log.Info("kube-ipvs-proxy", zap.String("version", version()))
	reportUpstreamFlags(c, log)
	logConfigFile(log, file)
	effective := proxyconfig.Effective(c)
	if path := c.String("write-config-to"); path != "" {
		return proxyconfig.Write(path, effective)
	}
	if c.Bool("cleanup") {
		return cleanup(log, cfg.ExcludeCIDRs)
	}
	if err := setOOMScoreAdj(c.Int("oom-score-adj")); err != nil {
		log.Warn("OOM score not adjusted", zap.Error(err))
	}
	settings.ipv6 = cfg.Desired.IPv6Capable
	if !cfg.Desired.IPv6Capable {
		log.Info("this node has no IPv6 (no /proc/net/if_inet6): IPv6 Services and endpoints are ignored")
	}
	if c.Bool("init-only") {
		// The privileged part of a start, for an init container.
		if _, err := openKernel(log, settings); err != nil {
			return fmt.Errorf("cannot run in IPVS mode: %w", err)
		}
		log.Info("kernel initialized (modules, sysctls, IPVS timeouts, conntrack); --init-only, exiting")
		return nil
	}
	// The netlink ipset code reports every attribute it does not parse
	// (bucketsize, initval: on every list) through the standard logger; that
	// is noise except when debugging the netlink layer itself.
	if c.Int("v") >= 6 {
		if undo, err := zap.RedirectStdLogAt(log.Named("stdlog"), zapcore.DebugLevel); err == nil {
			defer undo()
		}
	} else {
		stdlog.SetOutput(io.Discard)
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	rc, err := restConfig(c)
	if err != nil {
		return fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.UserAgent = "kube-ipvs-proxy"
	// Protobuf by default, as kube-proxy: decoding tens of thousands of
	// Services and EndpointSlices costs several times less CPU than JSON.
	rc.ContentType = c.String("kube-api-content-type")
	rc.AcceptContentTypes = cmp.Or(c.String("kube-api-accept-content-types"), rc.ContentType+",application/json")
	rc.QPS, rc.Burst = float32(c.Float64("kube-api-qps")), c.Int("kube-api-burst")
	rc.Wrap(informers.BufferWatches)
	client, err := kubeclient.New(rc)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	kernel, err := openKernel(log, settings)
	if err != nil {
		return fmt.Errorf("cannot run in IPVS mode: %w", err)
	}

	// Events go through a poster that names each warning by what it says:
	// the same warning from every node and every restart is one object.
	warnings := kevents.New(client, "kube-proxy", cfg.Desired.NodeName, log.Named("events"))
	go warnings.Run(ctx)
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: cfg.Desired.NodeName}
	warnings.Announce(nodeRef, v1.EventTypeNormal, "Starting", "StartKubeProxy", "Starting kube-ipvs-proxy.")
	eventConfigFile(warnings, nodeRef, file)

	health := healthz.New(2 * cfg.SyncPeriod)
	m := metrics.New()
	hard := c.Bool("bind-address-hard-fail")
	if err := serve(ctx, log, "healthz", c.String("healthz-bind-address"), hard, health.Handler()); err != nil {
		return err
	}
	configz, err := proxyconfig.Configz(effective)
	if err != nil {
		return err
	}
	extra := map[string]http.Handler{"/healthz": health.Handler(), "/livez": health.Handler(),
		"/configz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(configz)
		})}
	if c.Bool("profiling") {
		extra["/debug/pprof/"] = http.HandlerFunc(pprof.Index)
		extra["/debug/pprof/profile"] = http.HandlerFunc(pprof.Profile)
		extra["/debug/pprof/trace"] = http.HandlerFunc(pprof.Trace)
	}
	if err := serve(ctx, log, "metrics", c.String("metrics-bind-address"), hard, m.Handler(extra)); err != nil {
		return err
	}

	p := proxier.New(cfg, kernel, log, health, m, warnings)
	// The critical Services' own small list and watch first: the proxier
	// programs them from it long before the cluster-wide list completes.
	critical := p.Critical()
	if err := informers.StartCritical(ctx, client, cfg.CriticalServices, c.Duration("config-sync-period"), critical, critical, critical.Stop); err != nil {
		return err
	}
	if err := informers.Start(ctx, client, cfg.Desired.NodeName, c.Duration("config-sync-period"), p, p, p); err != nil {
		return err
	}
	log.Info("kube-ipvs-proxy started", zap.String("node", cfg.Desired.NodeName), zap.String("scheduler", cfg.Desired.Scheduler),
		zap.Duration("syncPeriod", cfg.SyncPeriod), zap.Duration("minSyncPeriod", cfg.MinSyncPeriod))
	p.Run(ctx)
	log.Info("shutting down; kernel state is left in place so traffic keeps flowing")
	return nil
}
