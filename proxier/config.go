package proxier

import (
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Schedulers are the IPVS schedulers kube-proxy accepts, for
// --ipvs-scheduler and SchedulerAnnotation.
var Schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "sh", "dh", "sed", "nq", "mh"}

// SchedulerAnnotation on a Service picks its IPVS scheduler, overriding
// --ipvs-scheduler for that Service alone.
const SchedulerAnnotation = "kube-ipvs-proxy.io/ipvs-scheduler"

// Config is what the proxier needs from the command line.
type Config struct {
	NodeName      string
	Scheduler     string
	SyncPeriod    time.Duration // forced full sync (drift check)
	MinSyncPeriod time.Duration // rate limit between syncs
	ClusterCIDRs  []netip.Prefix
	MasqueradeAll bool
	MasqueradeBit int
	ExcludeCIDRs  []netip.Prefix
	// NodePortAddresses (--nodeport-addresses) limits the node addresses
	// NodePorts are served on to these CIDRs, and to the Node's primary
	// address with NodePortPrimary; neither means every address.
	NodePortAddresses []netip.Prefix
	NodePortPrimary   bool
	// IPv6Capable says the kernel has IPv6, so the KUBE-6- ipsets are
	// created as upstream does. IPv6 Services are not programmed yet.
	IPv6Capable bool
	// CriticalServices are programmed before all others in a sync, so
	// that they answer early in a long cold start.
	CriticalServices []types.NamespacedName
	// AfterFirstSync, if set, is called once, on a goroutine of its own,
	// when the first sync has succeeded.
	AfterFirstSync func()
}

func (c *Config) excluded(a netip.Addr) bool {
	for _, p := range c.ExcludeCIDRs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
