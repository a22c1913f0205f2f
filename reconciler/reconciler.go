package reconciler

import (
	"cmp"
	"hash/maphash"
	"net/netip"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/realset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/rsstatus"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/serviceview"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// Reconciler keeps the kernel equal to the desired state. It remembers what
// it believes the kernel holds, so that a change to one Service is applied by
// comparing only that Service's objects, with no kernel dump; a drift check
// (driftCheck) re-reads the kernel periodically. Both paths end in apply,
// which handles only the keys marked dirty.
//
// The exported methods take mu (Record, Sync, ProgramFirst, Outcome,
// Failed, and the drift check's CheckNow and StartCheck); the others expect
// it held. Checking and CheckDone take no lock: they touch only the drift
// check's hand-over, which the sync goroutine alone reads and writes.
type Reconciler struct {
	// mu guards the reconciler's state: a sync holds it throughout, a
	// drift check a slice at a time (see pacer).
	mu    sync.Mutex
	drift driftCheck

	ipvs  ipvs.Interface
	addrs dummyiface.Interface
	sets  ipset.Interface
	// setNames are the ipsets whose entries are ours to manage.
	setNames []string
	// missingSets are those the kernel refused to create (SetsMissing):
	// their entries are neither read nor written, and wait, dirty, for
	// the set. Replaced whole, never changed in place.
	missingSets map[string]bool
	// excluded protects virtual servers that are not ours (--ipvs-exclude-cidrs).
	excluded func(netip.Addr) bool

	byService map[types.NamespacedName]desired.Keys // each Service's objects; vs.want has its values

	// One table per kind of kernel object (see table). A failed object is
	// retried alone, after a delay that doubles per failure up to the sync
	// period, while the other objects are written.
	vs    table[ipvs.Key, desired.VirtualServer, heldVS]
	addr  table[netip.Addr, struct{}, struct{}]
	entry table[desired.SetEntry, struct{}, struct{}]
	// rsStatus holds the failed real servers, members of vs's rows.
	rsStatus rsstatus.Tables
	// setUse is what the reconciler knows of its sets' sizes.
	setUse setUse
	now    func() time.Time
	// draining is what drains: real servers and virtual servers kept
	// while their connections end.
	draining drainState
	// flows are the stale UDP flows to delete from conntrack.
	flows staleFlows
	// reading plans the drift checks' reads.
	reading readPlan
	// programmed is when each Service was last fully programmed.
	programmed *serviceview.Programmed

	// writesFirst gives a sync's writes priority over a drift check's
	// per-virtual-server requests: apply holds it while it writes, and the
	// read takes it shared around each such request, so a write waits for
	// the one in flight, not for a stream of thousands (at 50k in the test
	// VM a single real-server write queued 115–138 ms behind them). The
	// long listings (virtual servers, addresses, set entries) are one call
	// each, which the kernel itself interleaves with writes between chunks;
	// holding writes off for a whole listing cost a sync 3 s.
	writesFirst sync.RWMutex

	// done is what was written since the last takeWork.
	done Work
}

// setUse is what the reconciler knows of its sets' sizes.
type setUse struct {
	// entries is how many entries each set is believed to hold, which a
	// drift check compares with the kernel's count (see dumpPlan).
	entries map[string]int
	// wanted is how many entries each set is wanted to hold.
	wanted map[string]int
	// capacity is each set's maxelem, as read or grown (see grow.go).
	capacity map[string]int
}

// drainState is what drains (drain.go, drainvs.go).
type drainState struct {
	// reals are the removed TCP real servers kept at weight 0 until
	// their connections end (graceful termination).
	reals map[ipvs.Key]map[netip.AddrPort]bool
	// servers are the TCP virtual servers no Service wants that are
	// kept while their real servers drain.
	servers map[ipvs.Key]bool
	// read holds the real servers, with their connection counts, that
	// startDrain read of a virtual server, for the apply that follows
	// (see connectionsOf); reads counts those dumps this sync
	// (drainReadsMax).
	read  map[ipvs.Key]*realset.Set
	reads int
}

// staleFlows are the conntrack entries of UDP flows to removed real
// servers: pending are those an apply found, which conntrack deletes.
type staleFlows struct {
	conntrack conntrack.Interface
	pending   []conntrack.Stale
}

// readPlan is how the drift checks read a large kernel (read.go).
type readPlan struct {
	// adoptSlice is how many keys adopt compares between pauses.
	adoptSlice int
	// dumpsMax is the most virtual servers whose real servers one drift
	// check dumps (Options.DumpsMax). plan is the
	// current read's share of them, rounds counts the reads that took a
	// share, and adopted says whether any read has been adopted yet.
	dumpsMax int
	plan     dumpPlan
	rounds   int
	adopted  bool
	// wholeNext says a share's read found a tenth of its virtual servers
	// drifted: the next read is whole, so that drift everywhere (a flushed
	// table) is repaired in two checks rather than one per share.
	wholeNext bool
	seed      maphash.Seed
}

// Work is what the reconciler wrote since the last takeWork, for metrics
// and logs.
type Work struct {
	Ops   int
	Times ApplyTimes
	// ConntrackCleared entries of stale UDP flows were deleted;
	// conntrackErr says why some could not be.
	ConntrackCleared [len(desired.Families)]int
	ConntrackErr     error
	// Grown are the ipsets grown, "name to size".
	Grown []string
}

func (r *Reconciler) takeWork() Work {
	w := r.done
	r.done = Work{}
	return w
}

// endRead stops recording written keys and returns the virtual servers
// written since beginRead, whose read is stale for drain.
func (r *Reconciler) endRead() map[ipvs.Key]bool {
	r.addr.endRead()
	r.entry.endRead()
	return r.vs.endRead()
}

// ApplyTimes splits an apply's time by the kind of kernel object written.
type ApplyTimes struct{ Addresses, Entries, VirtualServers time.Duration }

// DefaultRetryMax is kube-proxy's default sync period.
const DefaultRetryMax = 30 * time.Second

// Kernel is the kernel tables a reconciler writes.
type Kernel struct {
	IPVS  ipvs.Interface
	Links dummyiface.Interface
	Sets  ipset.Interface
	// Conntrack deletes the entries of UDP flows to removed real servers;
	// nil leaves them to time out.
	Conntrack conntrack.Interface
}

// Options are a reconciler's settings.
type Options struct {
	// SetNames are the ipsets whose entries are ours to manage.
	SetNames []string
	// Excluded protects virtual servers that are not ours
	// (--ipvs-exclude-cidrs); nil excludes none.
	Excluded func(netip.Addr) bool
	// RetryMax caps a failed object's retry delay (DefaultRetryMax if
	// zero): the sync period.
	RetryMax time.Duration
	// Now is the clock of retry delays; nil is time.Now.
	Now func() time.Time
	// DumpsMax is the most virtual servers whose real servers one drift
	// check dumps (realServerDumpsMax if zero), and AdoptSlice how many
	// keys it compares between pauses (250 if zero): how a large kernel is
	// read, which tests set low to see it with a small one.
	DumpsMax, AdoptSlice int
}

// New returns a reconciler that believes the kernel empty until its first
// drift check reads it.
func New(k Kernel, o Options) *Reconciler {
	retryMax := o.RetryMax
	if retryMax <= 0 {
		retryMax = DefaultRetryMax
	}
	excluded := o.Excluded
	if excluded == nil {
		excluded = func(netip.Addr) bool { return false }
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	r := &Reconciler{
		ipvs: k.IPVS, addrs: k.Links, sets: k.Sets, flows: staleFlows{conntrack: k.Conntrack}, setNames: o.SetNames, excluded: excluded,
		byService:  map[types.NamespacedName]desired.Keys{},
		vs:         newTable[ipvs.Key, desired.VirtualServer, heldVS](status.KindVirtualServer, retryMax),
		addr:       newTable[netip.Addr, struct{}, struct{}](status.KindAddress, retryMax),
		entry:      newTable[desired.SetEntry, struct{}, struct{}](status.KindSetEntry, retryMax),
		rsStatus:   rsstatus.New(retryMax),
		setUse:     setUse{entries: map[string]int{}, wanted: map[string]int{}, capacity: map[string]int{}},
		draining:   drainState{reals: map[ipvs.Key]map[netip.AddrPort]bool{}, servers: map[ipvs.Key]bool{}},
		now:        now,
		programmed: serviceview.NewProgrammed(),

		reading: readPlan{adoptSlice: cmp.Or(o.AdoptSlice, 250), dumpsMax: cmp.Or(o.DumpsMax, realServerDumpsMax), seed: maphash.MakeSeed()},
	}
	r.entry.counted = func(e desired.SetEntry, delta int) { r.setUse.entries[e.Set] += delta }
	r.drift.r = r
	return r
}

// Change is what one changed Service now wants.
type Change struct {
	Name  types.NamespacedName
	State desired.State
}

// Record takes what the changed Services want, writing nothing yet.
// It returns the sets some Service now wants an entry in.
func (r *Reconciler) Record(changes []Change) map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range changes {
		r.setService(c.Name, c.State)
	}
	inUse := make(map[string]bool, len(r.setNames))
	for _, s := range r.setNames {
		if r.setUse.wanted[s] > 0 {
			inUse[s] = true
		}
	}
	return inUse
}

// SetsMissing names the sets the kernel refused to create, replacing the
// last list: until a set is made, its entries are not read (they count as
// absent) and not written, and they fail no Service; the refusal is the
// kernel setup's to report. Once it is made, the next sync writes them.
func (r *Reconciler) SetsMissing(names []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var m map[string]bool
	for _, n := range names {
		if m == nil {
			m = map[string]bool{}
		}
		m[n] = true
	}
	r.missingSets = m
}

// Sync writes the dirty objects of the first Services, then every dirty
// object, and, given a finished drift check, drains real servers whose
// connections it saw end.
func (r *Reconciler) Sync(first []types.NamespacedName, read *CheckResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.forgetDrainRead()
	defer r.settleProgrammed()
	r.applyFirst(first)
	r.apply()
	if read != nil {
		r.drain(read.view, read.written)
		if len(r.vs.dirty) > 0 {
			r.apply() // virtual servers whose draining ended
		}
	}
}

// ProgramFirst writes the named Services' objects before any drift check
// has read the kernel: it reads their objects first (see readServices). It
// says how many objects were dirty and which writes failed, or why it could
// not read.
func (r *Reconciler) ProgramFirst(names []types.NamespacedName) (int, []error, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.forgetDrainRead()
	if err := r.readServices(names); err != nil {
		return 0, nil, err
	}
	n, errs := r.applyFirst(names)
	r.settleProgrammed()
	return n, errs, nil
}

// Outcome is what the reconciler did and knows since the last call, for
// metrics, logs and the retry timer.
type Outcome struct {
	Work
	Reports []status.Report
	Failed  map[status.Kind]int
	RetryAt time.Time // the earliest failed object's retry; zero if none
}

func (r *Reconciler) Outcome() Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Outcome{Work: r.takeWork(), Reports: r.takeReports(), Failed: r.failedCounts(), RetryAt: r.nextRetry()}
}

// heldVS is what the reconciler believes the kernel holds of one virtual
// server: its attributes and its real servers.
type heldVS struct {
	vs    ipvs.VirtualServer
	reals *realset.Set
}

// setService replaces what one Service wants and marks its objects dirty.
// A failed object it touches is retried at the next apply, not after its
// delay: what is wanted of it may have changed.
func (r *Reconciler) setService(name types.NamespacedName, st desired.State) {
	old := r.byService[name]
	for _, k := range old.VirtualServers {
		r.vs.delete(k, name)
		r.retryRealServersNow(k)
	}
	for _, a := range old.Addresses {
		r.addr.delete(a, name)
	}
	for _, e := range old.Entries {
		r.unwantEntry(e, name)
	}
	for _, v := range st.VirtualServers {
		r.vs.update(v.Virtual.Key, name, v)
		r.retryRealServersNow(v.Virtual.Key)
		r.endDrain(v.Virtual.Key)
	}
	for _, k := range old.VirtualServers {
		r.startDrain(k)
	}
	for _, a := range st.Addresses {
		r.addr.update(a, name, struct{}{})
	}
	for _, e := range st.Entries {
		r.wantEntry(e, name)
	}
	keys := st.Keys()
	if keys.Empty() {
		delete(r.byService, name)
	} else {
		r.byService[name] = keys
	}
	r.programmed.Changed(name, keys.Empty())
}

// retryRealServersNow makes virtual server k's failed real servers due.
func (r *Reconciler) retryRealServersNow(k ipvs.Key) {
	if t := r.rsStatus.Of(k); t != nil {
		t.RetryAllNow()
	}
}
