// Package app is the kube-ipvs-proxy command: its flags, the Options read
// from them and --config, and the start-up sequence that runs the proxier
// from those options (Run), with its HTTP servers, logging and kernel
// preparation.
package app

import (
	"cmp"
	"context"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	kevents "github.com/kube-ipvs-proxy/kube-ipvs-proxy/events"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/informers"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeclient"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxyconfig"
)

// Command is the kube-ipvs-proxy command: it reads the Options once
// (NewOptions), then runs them (Run).
func Command() *cli.App {
	return &cli.App{
		Name:         "kube-ipvs-proxy",
		Usage:        "Kubernetes service proxy on IPVS, a drop-in for kube-proxy --proxy-mode=ipvs",
		Flags:        Flags(),
		Commands:     []*cli.Command{diffCommand(), statusCommand()},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			o, err := NewOptions(c)
			if err != nil {
				return err
			}
			return Run(c.Context, o)
		},
	}
}

// usageError is what a flag the command does not take gets: one line
// naming it, in kube-proxy's words, and where the help is; not the help
// itself.
func usageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		msg = "unknown flag: --" + strings.TrimPrefix(name, "-")
	}
	return fmt.Errorf("%s\nsee '%s --help' for usage", msg, c.Command.HelpName)
}

// Run does what o asks for: print the version, one of the one-shot
// actions, or run the proxier until ctx is done or SIGTERM comes.
func Run(ctx context.Context, o *Options) error {
	if o.ShowVersion {
		fmt.Println("kube-ipvs-proxy", version())
		return nil
	}
	log, err := newLogger(o.Verbosity, o.LoggingFormat, o.VModule)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	routeKlog(log, o.Verbosity)
	// From here on an error is a log line like any other, so that a JSON
	// log stays JSON to its last line.
	if err := run(ctx, log, o); err != nil {
		log.Error("kube-ipvs-proxy stopped", zap.Error(err))
		return cli.Exit("", 1)
	}
	return nil
}

// run is the start-up sequence, in order.
func run(ctx context.Context, log *zap.Logger, o *Options) error {
	log.Info("kube-ipvs-proxy", zap.String("version", version()))
	o.logIgnored(log)
	logConfigFile(log, o.File)
	if o.WriteConfigTo != "" {
		return proxyconfig.Write(o.WriteConfigTo, o.Effective)
	}
	if o.Cleanup {
		return cleanup(log, o.Proxier.ExcludeCIDRs)
	}
	if err := setOOMScoreAdj(o.OOMScoreAdj); err != nil {
		log.Warn("OOM score not adjusted", zap.Error(err))
	}
	if !o.Kernel.IPv6 {
		log.Info("this node has no IPv6 (no /proc/net/if_inet6): IPv6 Services and endpoints are ignored")
	}
	if o.InitOnly {
		// The privileged part of a start, for an init container.
		if _, err := openKernel(log, o.Kernel); err != nil {
			return fmt.Errorf("cannot run in IPVS mode: %w", err)
		}
		log.Info("kernel initialized (modules, sysctls, IPVS timeouts, conntrack); --init-only, exiting")
		return nil
	}
	// The netlink ipset code reports every attribute it does not parse
	// (bucketsize, initval: on every list) through the standard logger;
	// that is noise except when debugging the netlink layer itself.
	if o.Verbosity >= 6 {
		if undo, err := zap.RedirectStdLogAt(log.Named("stdlog"), zapcore.DebugLevel); err == nil {
			defer undo()
		}
	} else {
		stdlog.SetOutput(io.Discard)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	client, err := newClient(o.Client, false)
	if err != nil {
		return err
	}
	criticalClient, err := newClient(o.Client, true)
	if err != nil {
		return err
	}
	kernel, err := openKernel(log, o.Kernel)
	if err != nil {
		return fmt.Errorf("cannot run in IPVS mode: %w", err)
	}

	// Events go through a poster that names each warning by what it says:
	// the same warning from every node and every restart is one object.
	node := o.Proxier.Desired.NodeName
	warnings := kevents.New(client, "kube-proxy", node, log.Named("events"))
	go warnings.Run(ctx)
	nodeRef := &v1.ObjectReference{Kind: "Node", Name: node}
	warnings.Announce(nodeRef, v1.EventTypeNormal, "Starting", "StartKubeProxy", "Starting kube-ipvs-proxy.")
	eventConfigFile(warnings, nodeRef, o.File)

	health := healthz.New(2 * o.Proxier.SyncPeriod)
	m := metrics.New()
	m.RegisterRESTClient()
	health.Served = m.CountHealth
	cfg := o.Proxier
	ipts := []iptables.Interface{kernel.IPTables}
	if kernel.IP6Tables != nil {
		ipts = append(ipts, kernel.IP6Tables)
	}
	var p *proxier.Proxier
	cfg.AfterFirstSync = func() {
		afterFirstSync(ctx)
		if !p.IPTablesModeLeft() {
			ipts = nil // nothing to look for: spare the node two iptables-save runs
		}
		removeLeftovers(ctx, log.Named("leftovers"), ipts, cfg.SyncPeriod)
	}
	p = proxier.New(cfg, kernel, log, health, m, warnings)
	var ipvsStats http.Handler
	if stats, ok := kernel.IPVS.(ipvs.StatsReader); o.IPVSStats && ok {
		rolling := &metrics.RollingStats{Source: stats}
		ipvsStats = metrics.IPVSStats{Read: rolling.Read, Owners: p.VirtualServerOwners}.Handler()
	}
	if err := serveHTTP(ctx, log, o, health, m, p, ipvsStats); err != nil {
		return err
	}
	// The critical Services' own small list and watch first, on connections
	// of their own: the proxier programs them from it long before the
	// cluster-wide list completes, whose megabytes would otherwise share the
	// one HTTP/2 connection (and its flow-control window) with them.
	critical := p.Critical()
	if err := informers.StartCritical(ctx, criticalClient, cfg.CriticalServices, o.ConfigSyncPeriod, critical, critical, critical.Stop); err != nil {
		return err
	}
	var cidrs informers.ServiceCIDRHandler
	if cfg.LocalRoutes {
		cidrs = p
	}
	if err := informers.Start(ctx, client, node, o.ConfigSyncPeriod, p, p, p, cidrs); err != nil {
		return err
	}
	log.Info("kube-ipvs-proxy started", zap.String("node", node), zap.String("scheduler", cfg.Desired.Scheduler),
		zap.Duration("syncPeriod", cfg.SyncPeriod), zap.Duration("minSyncPeriod", cfg.MinSyncPeriod))
	p.Run(ctx)
	log.Info("shutting down; kernel state is left in place so traffic keeps flowing")
	return nil
}

// newClient is the apiserver client: protobuf by default, as kube-proxy's
// (decoding tens of thousands of Services and EndpointSlices costs several
// times less CPU than JSON), with watch events buffered. client-go shares
// one connection between clients of the same configuration; ownConnection
// gives this client its own (a dial function of its own is never shared).
func newClient(o ClientOptions, ownConnection bool) (*kubeclient.Client, error) {
	var rc *rest.Config
	var err error
	if o.Kubeconfig == "" && o.Master == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags(o.Master, o.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.UserAgent = "kube-ipvs-proxy"
	rc.ContentType = o.ContentType
	rc.AcceptContentTypes = cmp.Or(o.AcceptContentTypes, rc.ContentType+",application/json")
	rc.QPS, rc.Burst = o.QPS, o.Burst
	rc.Wrap(informers.BufferWatches)
	if ownConnection {
		rc.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	client, err := kubeclient.New(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return client, nil
}

// logIgnored names, in one line each, what was given but is not applied.
func (o *Options) logIgnored(log *zap.Logger) {
	if o.showHiddenMetrics {
		log.Info("--show-hidden-metrics-for-version checked and ignored: kube-ipvs-proxy hides no metric")
	}
	if len(o.ignoredGates) > 0 {
		log.Info("feature gates checked and ignored: they change nothing kube-proxy's IPVS mode does",
			zap.String("gates", proxyconfig.FormatFeatureGates(o.ignoredGates)))
	}
	if len(o.ignoredFlags) > 0 {
		log.Info("flags of other modes or of klog, ignored", zap.Strings("flags", o.ignoredFlags))
	}
}

// setOOMScoreAdj sets the process's OOM score adjustment, as upstream does
// at start-up: the node should kill others before its service proxy.
func setOOMScoreAdj(v int) error {
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(v)), 0o644); err != nil {
		return fmt.Errorf("set oom_score_adj %d: %w", v, err)
	}
	return nil
}
