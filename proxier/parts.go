package proxier

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/svchealth"
)

// The named parts of a Proxier's state, each owned by the sync goroutine
// unless its comment says otherwise.

// driftSchedule is when the next drift check runs: at the sync period
// after lastFull, at the next sync if needFull, or after a failed kernel
// read at fullAt, with backoff by failures.
type driftSchedule struct {
	lastFull time.Time
	needFull bool
	fullAt   time.Time
	failures int
}

// kernelSetup is the setup's progress (setupKernel): its status, retried
// like a kernel object under its one key setupKey; the outcome of a retry
// running on its own goroutine (retrySetup; nil when none runs); the
// result of the setup Run starts while the informers list (early; nil once
// a sync took it, or without Run); and whether it succeeded once (done),
// so that the first sync need not set up again. mu makes setups one at a
// time. On a node where kube-proxy's iptables mode's rules still answer,
// our chains (which replace its dispatch) wait for the first sync's apply
// (takeover). checked says the first setup looked, under mu, and
// iptablesMode whether it found any of that mode's chains. refused are the
// sets the kernel refused at the last setup (refuseSets), written under mu.
type kernelSetup struct {
	status       status.Table[string]
	retry        chan error
	mu           sync.Mutex
	early        earlySetup
	done         bool
	checked      bool
	refused      atomic.Pointer[[]string]
	takeover     atomic.Bool
	iptablesMode atomic.Bool
}

// earlySetup is the setup Run starts (setUpEarly): one channel per step,
// how many were taken, and whether the first left the kernel writable.
type earlySetup struct {
	steps    []chan error
	taken    int
	writable bool
}

// noLocalEndpoints are the Services whose internal or external traffic
// policy Local finds no endpoint on this node, per IP family.
type noLocalEndpoints struct {
	internal, external [len(desired.Families)]map[types.NamespacedName]bool
}

func newNoLocalEndpoints() noLocalEndpoints {
	var n noLocalEndpoints
	for _, f := range desired.Families {
		n.internal[f], n.external[f] = map[types.NamespacedName]bool{}, map[types.NamespacedName]bool{}
	}
	return n
}

// blockedVIPs are each Service's load-balancer VIP:ports the node may not
// reach, and all of them sorted, rebuilt when dirty.
type blockedVIPs struct {
	byService map[types.NamespacedName][]ipset.Entry
	all       []ipset.Entry
	dirty     bool
}

// healthChecks are the LoadBalancer health checks to serve (want), where
// (on), and the server serving them; dirty says they changed, or a port
// could not be opened (failed), since the server last took them.
type healthChecks struct {
	want map[types.NamespacedName]svchealth.Service
	on   [len(desired.Families)]svchealth.Listen
	// retryAt is when what could not be opened is tried again.
	retryAt time.Time
	dirty   bool
	failed  map[types.NamespacedName]bool
	server  *svchealth.Server
}
