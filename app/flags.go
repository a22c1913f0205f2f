package app

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
)

// defaultCritical are the Services node agents need first: the apiserver and
// cluster DNS.
var defaultCritical = []string{"default/kubernetes", "kube-system/kube-dns"}

// Flags are kube-proxy's flags (the same in v1.34 and v1.37), with its names and defaults, and a
// few of our own.
func Flags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "a KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1); flags given on the command line win"},
		&cli.StringFlag{Name: "kubeconfig", Usage: "path to a kubeconfig file (in-cluster config when empty)"},
		&cli.StringFlag{Name: "master", Usage: "address of the Kubernetes API server (overrides the kubeconfig)"},
		&cli.StringFlag{Name: "hostname-override", Usage: "name of this node's Node object (default: the hostname)"},
		&cli.StringFlag{Name: "proxy-mode", Aliases: []string{"mode"}, Value: "ipvs", Usage: "proxy mode; only 'ipvs' is supported"},
		&cli.StringFlag{Name: "ipvs-scheduler", Usage: "IPVS scheduler: " + strings.Join(desired.Schedulers, ", ") + " (empty means rr)"},
		&cli.DurationFlag{Name: "ipvs-sync-period", Value: 30 * time.Second, Usage: "how often a full sync re-reads the kernel and repairs drift (> 0)"},
		&cli.DurationFlag{Name: "ipvs-min-sync-period", Value: time.Second, Usage: "minimum time between syncs; 0 syncs on every change"},
		&cli.StringSliceFlag{Name: "ipvs-exclude-cidrs", Usage: "CIDRs whose virtual servers are never deleted"},
		&cli.BoolFlag{Name: "ipvs-strict-arp", Usage: "set arp_ignore=1 and arp_announce=2 on all links, so kube-ipvs0's addresses are never claimed on the node's network"},
		&cli.DurationFlag{Name: "ipvs-tcp-timeout", Usage: "IPVS timeout of idle established TCP connections; 0 leaves the kernel's (900s)"},
		&cli.DurationFlag{Name: "ipvs-tcpfin-timeout", Usage: "IPVS timeout of TCP connections after a FIN; 0 leaves the kernel's (120s)"},
		&cli.DurationFlag{Name: "ipvs-udp-timeout", Usage: "IPVS timeout of UDP flows; 0 leaves the kernel's (300s)"},
		&cli.StringSliceFlag{Name: "nodeport-addresses",
			Usage: "CIDRs of the node addresses NodePorts are served on, mixed with the keywords 'primary' (the Node's primary addresses), 'localhost' and 'all'; per IP family, a family with no CIDR given is served on every address (default: every address)"},
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
		&cli.StringFlag{Name: "ipvs-vip-mode", Value: "addresses",
			Usage: "how cluster IPs are made local: addresses (one per Service on kube-ipvs0, as upstream) or local-route (one route per Service CIDR of each family the node has, read from the ServiceCIDRs; experimental)"},
		&cli.BoolFlag{Name: "ipvs-stats", Usage: "serve the kernel's statistics of every virtual and real server as metrics on /metrics/ipvs (seven series per real server)"},
		&cli.BoolFlag{Name: "debug-state-remote", Usage: "answer /debug/state on the metrics address from off the node too; by default only from loopback (it names every Service and backend)"},
		&cli.IntFlag{Name: "v", Aliases: []string{"verbosity"}, Usage: "log verbosity; 4 and above logs every sync"},
	}, upstreamFlags()...)
}

// upstreamFlags are the rest of upstream kube-proxy's flags, with
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
		&cli.StringFlag{Name: "feature-gates", Usage: "Name=true|false pairs, checked as kube-proxy v1.37 checks them; AllowServiceExternalIPs=false is applied, the others change nothing IPVS mode does"},
		&cli.StringFlag{Name: "show-hidden-metrics-for-version", Usage: "a MAJOR.MINOR version; kube-ipvs-proxy hides no metric"},
		// clientConnection.acceptContentTypes of the configuration file (upstream has no flag).
		&cli.StringFlag{Name: "kube-api-accept-content-types", Hidden: true},
		// Of klog, other modes or other platforms: accepted and ignored.
		&cli.DurationFlag{Name: "log-flush-frequency", Value: 5 * time.Second, Usage: "(ignored: zap writes at once)"},
		&cli.StringFlag{Name: "log-json-info-buffer-size", Usage: "(ignored)"},
		&cli.BoolFlag{Name: "log-json-split-stream", Usage: "(ignored)"},
		&cli.StringFlag{Name: "log-text-info-buffer-size", Usage: "(ignored)"},
		&cli.BoolFlag{Name: "log-text-split-stream", Usage: "(ignored)"},
		&cli.StringFlag{Name: "vmodule", Usage: "comma-separated pattern=N: verbosity N for the source files whose name (without .go) matches the glob; 4 and above logs their per-sync lines"},
		&cli.BoolFlag{Name: "iptables-localhost-nodeports", Value: true, Usage: "(ignored: iptables mode's)"},
		&cli.DurationFlag{Name: "iptables-min-sync-period", Value: time.Second, Usage: "(ignored: iptables mode's)"},
		&cli.DurationFlag{Name: "iptables-sync-period", Value: 30 * time.Second, Usage: "(ignored: iptables mode's)"},
		&cli.StringFlag{Name: "boot-id-file", Value: "/proc/sys/kernel/random/boot_id", Usage: "(ignored)"},
		&cli.StringFlag{Name: "machine-id-file", Value: "/etc/machine-id,/var/lib/dbus/machine-id", Usage: "(ignored)"},
	}
}

var (
	ignoredFlags = []string{"log-flush-frequency", "log-json-info-buffer-size", "log-json-split-stream",
		"log-text-info-buffer-size", "log-text-split-stream", "iptables-localhost-nodeports",
		"iptables-min-sync-period", "iptables-sync-period", "boot-id-file", "machine-id-file"}
)

// flagValues are every flag's value in force, by name, as /flagz shows
// them: lists comma separated.
func flagValues(c *cli.Context) map[string]string {
	out := map[string]string{}
	for _, f := range c.App.Flags {
		name := f.Names()[0]
		if _, list := f.(*cli.StringSliceFlag); list {
			out[name] = strings.Join(c.StringSlice(name), ",")
			continue
		}
		out[name] = fmt.Sprint(c.Value(name))
	}
	return out
}
