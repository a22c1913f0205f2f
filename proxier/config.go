package proxier

import (
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
)

// Config is what the proxier needs from its configuration (the flags and
// the config file, which package app reads) and from its caller.
type Config struct {
	// Desired is what the desired state of a Service depends on besides
	// the API objects. Its IPv6Capable also makes the KUBE-6- ipsets and
	// ip6tables chains be created even without IPv6 Services, as
	// upstream does.
	Desired desired.Config
	// Glue is what the iptables chains depend on.
	Glue          glue.Config
	SyncPeriod    time.Duration // forced full sync (drift check)
	MinSyncPeriod time.Duration // rate limit between syncs
	// ExcludeCIDRs (--ipvs-exclude-cidrs) are virtual servers not ours.
	ExcludeCIDRs []netip.Prefix
	// LocalRoutes (--ipvs-vip-mode=local-route) makes each Service CIDR
	// of the node's families local with one local route instead of
	// binding an address per cluster IP (routes.go); the proxier is then
	// given the ServiceCIDRs (OnServiceCIDRs).
	LocalRoutes bool
	// NodePortAddresses (--nodeport-addresses) limits the node addresses
	// NodePorts are served on to these CIDRs, and to the Node's primary
	// addresses with NodePortPrimary, per IP family: a family with
	// neither is served on every address (nodePortFilter).
	NodePortAddresses []netip.Prefix
	NodePortPrimary   bool
	// PrimaryOverride (--bind-address, when not 0.0.0.0 or ::) is the
	// node's primary address of its family in place of the Node's, as
	// upstream: it decides whether load-balancer source ranges hold the
	// node, and is the 'primary' of --nodeport-addresses.
	PrimaryOverride netip.Addr
	// CriticalServices are programmed before all others in a sync, so
	// that they answer early in a long cold start.
	CriticalServices []types.NamespacedName
	// ServeNoHealthChecks leaves the LoadBalancers' health check node
	// ports closed: a one-shot sync (diff) must not take them from the
	// proxier that serves them.
	ServeNoHealthChecks bool
	// AfterFirstSync, if set, is called once, on a goroutine of its own,
	// when the first sync has succeeded.
	AfterFirstSync func()
	// Now is the clock of retry delays, the reconciler's too; nil is
	// time.Now.
	Now func() time.Time
}

func (c *Config) excluded(a netip.Addr) bool {
	for _, p := range c.ExcludeCIDRs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
