package main

import (
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxyconfig"
)

// upstreamFlags are the rest of upstream kube-proxy v1.34's flags, with
// their names and defaults, so that an existing manifest runs: a flag
// unknown to the proxier would be fatal.
func upstreamFlags() []cli.Flag {
	return []cli.Flag{
		// Applied.
		&cli.Float64Flag{Name: "kube-api-qps", Value: 5, Usage: "QPS to use while talking with the apiserver"},
		&cli.IntFlag{Name: "kube-api-burst", Value: 10, Usage: "burst to use while talking with the apiserver"},
		&cli.StringFlag{Name: "kube-api-content-type", Value: "application/vnd.kubernetes.protobuf", Usage: "content type of requests sent to the apiserver"},
		&cli.IntFlag{Name: "oom-score-adj", Value: -999, Usage: "the process's oom_score_adj, [-1000, 1000]"},
		&cli.StringFlag{Name: "logging-format", Value: "text", Usage: "log format: text or json"},
		&cli.BoolFlag{Name: "version", Usage: "print the version and exit"},
		&cli.IntFlag{Name: "conntrack-max-per-core", Value: 32768, Usage: "conntrack entries per CPU (0 leaves the table size as is)"},
		&cli.IntFlag{Name: "conntrack-min", Value: 131072, Usage: "conntrack entries at least, whatever the CPU count"},
		&cli.BoolFlag{Name: "conntrack-tcp-be-liberal", Usage: "mark out-of-window TCP packets INVALID no more"},
		&cli.DurationFlag{Name: "conntrack-tcp-timeout-close-wait", Value: time.Hour, Usage: "conntrack timeout of TCP in CLOSE_WAIT (0 leaves it)"},
		&cli.DurationFlag{Name: "conntrack-tcp-timeout-established", Value: 24 * time.Hour, Usage: "conntrack timeout of idle established TCP (0 leaves it)"},
		&cli.DurationFlag{Name: "conntrack-udp-timeout", Usage: "conntrack timeout of unreplied UDP (0 leaves it)"},
		&cli.DurationFlag{Name: "conntrack-udp-timeout-stream", Usage: "conntrack timeout of assured UDP (0 leaves it)"},
		&cli.BoolFlag{Name: "cleanup", Usage: "remove every kernel object of ours (virtual servers outside --ipvs-exclude-cidrs, kube-ipvs0, our ipsets and chains) and exit"},
		&cli.BoolFlag{Name: "init-only", Usage: "do the privileged setup (modules, sysctls, IPVS timeouts, conntrack) and exit"},
		&cli.StringFlag{Name: "write-config-to", Usage: "write the effective configuration to this file as a KubeProxyConfiguration and exit"},
		&cli.StringFlag{Name: "bind-address", Value: "0.0.0.0", Usage: "the node's primary IP of its family, in place of the Node's (0.0.0.0 or :: for the Node's)"},
		// Checked, then ignored with one Info line: nothing of ours depends on them.
		&cli.StringFlag{Name: "feature-gates", Usage: "Name=true|false pairs; kube-ipvs-proxy behaves as kube-proxy v1.34 with its default gates"},
		&cli.StringFlag{Name: "show-hidden-metrics-for-version", Usage: "a MAJOR.MINOR version; kube-ipvs-proxy hides no metric"},
		// clientConnection.acceptContentTypes of the configuration file (upstream has no flag).
		&cli.StringFlag{Name: "kube-api-accept-content-types", Hidden: true},
		// Of klog, other modes or other platforms: accepted and ignored.
		&cli.DurationFlag{Name: "log-flush-frequency", Value: 5 * time.Second, Usage: "(ignored: zap writes at once)"},
		&cli.StringFlag{Name: "log-json-info-buffer-size", Usage: "(ignored)"},
		&cli.BoolFlag{Name: "log-json-split-stream", Usage: "(ignored)"},
		&cli.StringFlag{Name: "log-text-info-buffer-size", Usage: "(ignored)"},
		&cli.BoolFlag{Name: "log-text-split-stream", Usage: "(ignored)"},
		&cli.StringFlag{Name: "vmodule", Usage: "(ignored)"},
		&cli.BoolFlag{Name: "iptables-localhost-nodeports", Value: true, Usage: "(ignored: iptables mode's)"},
		&cli.DurationFlag{Name: "iptables-min-sync-period", Value: time.Second, Usage: "(ignored: iptables mode's)"},
		&cli.DurationFlag{Name: "iptables-sync-period", Value: 30 * time.Second, Usage: "(ignored: iptables mode's)"},
		&cli.StringFlag{Name: "boot-id-file", Value: "/proc/sys/kernel/random/boot_id", Usage: "(ignored)"},
		&cli.StringFlag{Name: "machine-id-file", Value: "/etc/machine-id,/var/lib/dbus/machine-id", Usage: "(ignored)"},
	}
}

var (
	ignoredFlags = []string{"log-flush-frequency", "log-json-info-buffer-size", "log-json-split-stream",
		"log-text-info-buffer-size", "log-text-split-stream", "vmodule", "iptables-localhost-nodeports",
		"iptables-min-sync-period", "iptables-sync-period", "boot-id-file", "machine-id-file"}
)

// Of the feature gates kube-proxy v1.34 reads in IPVS mode,
// PreferSameTrafficDistribution (default true) is applied
// (proxier.Config.IgnoreNodeHints). These are GA and locked: upstream
// refuses another value, and so do we. Every other gate changes nothing
// kube-proxy's IPVS mode does; it is accepted and ignored (upstream also
// refuses names it does not know, which would need its whole list).
var lockedGates = map[string]bool{"LoadBalancerIPMode": true}

const appliedGate = "PreferSameTrafficDistribution"

// featureGates checks --feature-gates as upstream would and applies the
// one gate that changes what we program.
func featureGates(c *cli.Context, cfg *proxier.Config) error {
	gates, err := proxyconfig.ParseFeatureGates(c.String("feature-gates"))
	if err != nil {
		return fmt.Errorf("--feature-gates: %w", err)
	}
	for name, on := range gates {
		if locked, ok := lockedGates[name]; ok && on != locked {
			return fmt.Errorf("--feature-gates: %s is locked to %v in kube-proxy v1.34", name, locked)
		}
	}
	if on, set := gates[appliedGate]; set && !on {
		cfg.Desired.IgnoreNodeHints = true
	}
	return nil
}

// reportUpstreamFlags names, in one line each, the flags given that are
// not applied.
func reportUpstreamFlags(c *cli.Context, log *zap.Logger) {
	given := func(names []string) []string {
		var out []string
		for _, n := range names {
			if c.IsSet(n) {
				out = append(out, "--"+n)
			}
		}
		return out
	}
	if c.IsSet("show-hidden-metrics-for-version") {
		log.Info("--show-hidden-metrics-for-version checked and ignored: kube-ipvs-proxy hides no metric")
	}
	gates, _ := proxyconfig.ParseFeatureGates(c.String("feature-gates")) // checked by featureGates
	delete(gates, appliedGate)
	if len(gates) > 0 {
		log.Info("feature gates checked and ignored: they change nothing kube-proxy's IPVS mode does",
			zap.String("gates", proxyconfig.FormatFeatureGates(gates)))
	}
	if f := given(ignoredFlags); len(f) > 0 {
		log.Info("flags of other modes or of klog, ignored", zap.Strings("flags", f))
	}
}

// checkUpstreamFlags checks the flags that are ignored but whose values
// upstream checks, so that a typo fails here as it would there.
// --feature-gates is checked by featureGates.
func checkUpstreamFlags(c *cli.Context) error {
	if v := c.String("show-hidden-metrics-for-version"); v != "" {
		major, minor, ok := strings.Cut(v, ".")
		if _, err := strconv.ParseUint(major, 10, 32); err != nil || !ok {
			return fmt.Errorf("--show-hidden-metrics-for-version=%q: not a MAJOR.MINOR version", v)
		}
		if _, err := strconv.ParseUint(minor, 10, 32); err != nil {
			return fmt.Errorf("--show-hidden-metrics-for-version=%q: not a MAJOR.MINOR version", v)
		}
	}
	return nil
}

// primaryOverride reads --bind-address: an address other than 0.0.0.0 or
// :: is the node's primary address of its family.
func primaryOverride(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("--bind-address=%q: not an IP address", s)
	}
	if a.IsUnspecified() {
		return netip.Addr{}, nil
	}
	return a.Unmap(), nil
}

// setOOMScoreAdj sets the process's OOM score adjustment, as upstream does
// at start-up: the node should kill others before its service proxy.
func setOOMScoreAdj(v int) error {
	if v < -1000 || v > 1000 {
		return fmt.Errorf("--oom-score-adj=%d: must be within [-1000, 1000]", v)
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(v)), 0o644); err != nil {
		return fmt.Errorf("set oom_score_adj %d: %w", v, err)
	}
	return nil
}
