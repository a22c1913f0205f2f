package proxier

import (
	"errors"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// owners maps each desired kernel object to the Services that want it. Most
// objects have one owner; a shared one (an address or ipset entry two
// Services need) stays until its last owner lets go. When owners disagree on
// a value, the alphabetically first Service wins, so the result is stable.
type owners[K comparable, V any] map[K]owned[V]

// owned holds an object's first owner inline: a map per object, for the one
// in a thousand that has a second owner, cost ~1 KB per object at 10k
// Services.
type owned[V any] struct {
	owner types.NamespacedName
	value V
	more  map[types.NamespacedName]V // further owners, if any
}

func (o owners[K, V]) add(k K, owner types.NamespacedName, v V) {
	cur, ok := o[k]
	switch {
	case !ok || cur.owner == owner:
		cur.owner, cur.value = owner, v
	default:
		if cur.more == nil {
			cur.more = map[types.NamespacedName]V{}
		}
		cur.more[owner] = v
	}
	o[k] = cur
}

func (o owners[K, V]) remove(k K, owner types.NamespacedName) {
	cur, ok := o[k]
	switch {
	case !ok:
		return
	case cur.owner != owner:
		delete(cur.more, owner)
	case len(cur.more) == 0:
		delete(o, k)
		return
	default: // promote any other owner
		for n, v := range cur.more {
			cur.owner, cur.value = n, v
			delete(cur.more, n)
			break
		}
	}
	if len(cur.more) == 0 {
		cur.more = nil
	}
	o[k] = cur
}

// owner is a Service that wants k, or zero if none does.
func (o owners[K, V]) owner(k K) types.NamespacedName { return o[k].owner }

func (o owners[K, V]) get(k K) (V, bool) {
	cur, ok := o[k]
	if !ok || len(cur.more) == 0 {
		return cur.value, ok
	}
	first, v := cur.owner, cur.value
	for n, mv := range cur.more {
		if n.String() < first.String() {
			first, v = n, mv
		}
	}
	return v, true
}

// reconciler keeps the kernel equal to the desired state. It remembers what
// it believes the kernel holds, so that a change to one Service is applied by
// comparing only that Service's objects, with no kernel dump; refresh re-reads
// the kernel for the periodic drift check. Both paths end in apply, which
// handles only the keys marked dirty.
type reconciler struct {
	ipvs  ipvs.Interface
	addrs dummyiface.Interface
	sets  ipset.Interface
	// setNames are the ipsets whose entries are ours to manage.
	setNames []string
	// excluded protects virtual servers that are not ours (--ipvs-exclude-cidrs).
	excluded func(netip.Addr) bool

	byService map[types.NamespacedName]serviceState

	wantVS    owners[ipvs.Key, virtualServerState]
	wantAddr  owners[netip.Addr, struct{}]
	wantEntry owners[setEntry, struct{}]

	haveVS    map[ipvs.Key]ipvs.VirtualServer
	haveRS    map[ipvs.Key]*realSet
	haveAddr  map[netip.Addr]bool
	haveEntry map[setEntry]bool
	// entryCount is how many entries each set is believed to hold, which a
	// drift check compares with the kernel's count (see dumpPlan).
	entryCount map[string]int

	dirtyVS    map[ipvs.Key]bool
	dirtyAddr  map[netip.Addr]bool
	dirtyEntry map[setEntry]bool

	// The objects whose last write failed, by kind: each is retried
	// alone, after a delay that doubles per failure up to retryMax (the
	// sync period), while the other objects are written.
	vsStatus    statusTable[ipvs.Key]
	rsStatus    realServerStatus
	addrStatus  statusTable[netip.Addr]
	entryStatus statusTable[setEntry]
	retryMax    time.Duration
	now         func() time.Time

	// draining holds removed TCP real servers kept at weight 0 until their
	// connections end (graceful termination).
	draining map[ipvs.Key]map[netip.AddrPort]bool

	// written records writes while a kernel read is in flight and until it
	// is adopted (nil otherwise).
	written *writtenKeys
	// adoptSlice is how many keys adopt compares between pauses.
	adoptSlice int
	// dumpsMax is the most virtual servers whose real servers one drift
	// check dumps (realServerDumpsMax; tests lower it). plan is the
	// current read's share of them, rounds counts the reads that took a
	// share, and adopted says whether any read has been adopted yet.
	dumpsMax int
	plan     dumpPlan
	rounds   int
	adopted  bool
	seed     maphash.Seed

	// writesFirst gives a sync's writes priority over a drift check's
	// per-virtual-server requests: apply holds it while it writes, and the
	// read takes it shared around each such request, so a write waits for
	// the one in flight, not for a stream of thousands (at 50k in the test
	// VM a single real-server write queued 115–138 ms behind them). The
	// long listings (virtual servers, addresses, set entries) are one call
	// each, which the kernel itself interleaves with writes between chunks;
	// holding writes off for a whole listing cost a sync 3 s.
	writesFirst sync.RWMutex

	// ops counts kernel writes, for logs and tests.
	ops int
	// applied adds up how long applies spent on each kind, for logs; the
	// proxier resets it for every sync.
	applied applyTimes
}

// applyTimes splits an apply's time by the kind of kernel object written.
type applyTimes struct{ addresses, entries, virtualServers time.Duration }

func newReconciler(v ipvs.Interface, a dummyiface.Interface, s ipset.Interface, setNames []string, excluded func(netip.Addr) bool) *reconciler {
	return &reconciler{
		ipvs: v, addrs: a, sets: s, setNames: setNames, excluded: excluded,
		byService:  map[types.NamespacedName]serviceState{},
		wantVS:     owners[ipvs.Key, virtualServerState]{},
		wantAddr:   owners[netip.Addr, struct{}]{},
		wantEntry:  owners[setEntry, struct{}]{},
		haveVS:     map[ipvs.Key]ipvs.VirtualServer{},
		haveRS:     map[ipvs.Key]*realSet{},
		haveAddr:   map[netip.Addr]bool{},
		haveEntry:  map[setEntry]bool{},
		entryCount: map[string]int{},
		dirtyVS:    map[ipvs.Key]bool{},
		dirtyAddr:  map[netip.Addr]bool{},
		dirtyEntry: map[setEntry]bool{},
		draining:   map[ipvs.Key]map[netip.AddrPort]bool{},

		vsStatus:    newStatusTable[ipvs.Key](kindVirtualServer),
		rsStatus:    realServerStatus{byVS: map[ipvs.Key]*statusTable[netip.AddrPort]{}},
		addrStatus:  newStatusTable[netip.Addr](kindAddress),
		entryStatus: newStatusTable[setEntry](kindSetEntry),
		retryMax:    30 * time.Second,
		now:         time.Now,

		adoptSlice: 250,
		dumpsMax:   realServerDumpsMax,
		seed:       maphash.MakeSeed(),
	}
}

// setService replaces what one Service wants and marks its objects dirty.
// A failed object it touches is retried at the next apply, not after its
// delay: what is wanted of it may have changed.
func (r *reconciler) setService(name types.NamespacedName, st serviceState) {
	old := r.byService[name]
	for _, v := range old.virtualServers {
		r.wantVS.remove(v.vs.Key, name)
		r.markVS(v.vs.Key)
	}
	for _, a := range old.addresses {
		r.wantAddr.remove(a, name)
		markDirty(r.dirtyAddr, &r.addrStatus, a)
	}
	for _, e := range old.entries {
		r.wantEntry.remove(e, name)
		markDirty(r.dirtyEntry, &r.entryStatus, e)
	}
	for _, v := range st.virtualServers {
		r.wantVS.add(v.vs.Key, name, v)
		r.markVS(v.vs.Key)
	}
	for _, a := range st.addresses {
		r.wantAddr.add(a, name, struct{}{})
		markDirty(r.dirtyAddr, &r.addrStatus, a)
	}
	for _, e := range st.entries {
		r.wantEntry.add(e, name, struct{}{})
		markDirty(r.dirtyEntry, &r.entryStatus, e)
	}
	if len(st.virtualServers) == 0 && len(st.addresses) == 0 && len(st.entries) == 0 {
		delete(r.byService, name)
	} else {
		r.byService[name] = st
	}
}

func markDirty[K comparable](dirty map[K]bool, status *statusTable[K], k K) {
	dirty[k] = true
	status.retryNow(k)
}

// markVS marks virtual server k dirty, with its failed real servers due.
func (r *reconciler) markVS(k ipvs.Key) {
	markDirty(r.dirtyVS, &r.vsStatus, k)
	if t := r.rsStatus.of(k); t != nil {
		for _, f := range t.failed {
			f.retryAt = time.Time{}
		}
	}
}

// kernelView is the kernel as one drift check read it.
type kernelView struct {
	vs    map[ipvs.Key]ipvs.VirtualServer
	rs    map[ipvs.Key]*realSet
	addr  map[netip.Addr]bool
	entry map[setEntry]bool
	// took is how long each part of the read took, for logs: at scale the
	// kernel's side of these dumps is most of a drift check.
	took readTimes
	// realServersOf counts the virtual servers whose real servers were read;
	// rs has no entry for the others (see dumpPlan).
	realServersOf int
	// only, when not nil, holds the keys this read looked at (the plan's
	// believed share), the virtual servers not having been listed (see
	// dumpPlan); vs holds those found.
	only map[ipvs.Key]believedVS
	// unreadSets are the sets whose entries were not listed, their counts
	// being what the belief expected; entry has none of theirs.
	unreadSets map[string]bool
}

type readTimes struct{ virtualServers, realServers, addresses, sets time.Duration }

// writtenKeys are the keys the reconciler wrote while a kernelView was being
// read: for them the view may be stale and the reconciler's belief is newer.
type writtenKeys struct {
	vs    map[ipvs.Key]bool
	addr  map[netip.Addr]bool
	entry map[setEntry]bool
}

// beginRead starts recording written keys and plans whose real servers the
// read dumps; call it on the sync goroutine before readKernel starts.
func (r *reconciler) beginRead() {
	r.written = &writtenKeys{vs: map[ipvs.Key]bool{}, addr: map[netip.Addr]bool{}, entry: map[setEntry]bool{}}
	r.plan = dumpPlan{}
	n := len(r.haveVS)
	if !r.adopted || n <= r.dumpsMax {
		return
	}
	r.plan = dumpPlan{seed: r.seed, shares: (n + r.dumpsMax - 1) / r.dumpsMax, always: map[ipvs.Key]bool{}}
	r.plan.share = r.rounds % r.plan.shares
	r.rounds++
	for k := range r.draining {
		r.plan.always[k] = true
	}
}

// planShare completes beginRead's plan, when the read does not list the
// virtual servers, with what the reconciler believes about its share. It
// hashes every believed key (~0.3 s at 50k in the test VM), so a drift
// check calls it on its own goroutine, holding l, which it releases every
// adoptSlice keys; keys written meanwhile are marked written, and adopt
// leaves them alone. The read takes l again to compare each set's count
// with the belief's (see dumpPlan).
func (r *reconciler) planShare(l sync.Locker) {
	if r.plan.shares <= 1 || r.plan.share == 0 {
		return
	}
	r.plan.counts = l
	r.plan.believed = map[ipvs.Key]believedVS{}
	pause := r.pacer(l)
	for k, vs := range r.haveVS {
		pause()
		if r.plan.covers(k) {
			r.plan.believed[k] = believedVS{vs: vs, reals: r.haveRS[k].len() > 0}
		}
	}
}

// realServerDumpsMax is the most virtual servers whose real servers one drift
// check dumps. The kernel answers one dump per virtual server (~0.4 ms each in
// the test VM: 20 of a 50k check's 33 s, during which syncs' writes queue
// behind the dumps); above this, each check dumps a share and every virtual
// server's real servers are checked within a few sync periods.
const realServerDumpsMax = 15000

// dumpPlan says whose real servers a drift check dumps: all when shares is
// at most one, else those whose key hashes to share, and those always (real
// servers draining, whose connection counts drain needs). Addresses are
// read in full every time.
//
// The list of virtual servers is read in full only when share is 0, once
// every shares checks: the kernel resumes that dump from the table's start
// for every 32 KiB of answer, holding the IPVS mutex our writes need, so at
// 50k it costs seconds and delays syncs. The other checks read just the
// share's believed virtual servers, by their real servers; strays and
// virtual servers whose attributes were changed by hand wait for the next
// full list. Those checks also list only the ipsets whose entry count (read
// from the set's header) differs from the belief's: listing a 50k-entry set
// takes the kernel seconds, and a flushed set shows in its count.
type dumpPlan struct {
	seed          maphash.Seed
	share, shares int
	always        map[ipvs.Key]bool
	// believed is, when the list is not read, what the reconciler believed
	// about the virtual servers the share covers as the read began. counts
	// is then the lock syncs hold while they write: the read holds it while
	// it compares a set's count in the kernel with the belief's, so that a
	// sync's writes during the read do not make the two differ.
	believed map[ipvs.Key]believedVS
	counts   sync.Locker
}

type believedVS struct {
	vs    ipvs.VirtualServer
	reals bool // whether it was believed to have real servers
}

func (p dumpPlan) covers(k ipvs.Key) bool {
	return p.shares <= 1 || p.always[k] || maphash.Comparable(p.seed, k)%uint64(p.shares) == uint64(p.share)
}

// tableReadMax is the most virtual servers whose real servers a drift check
// reads from /proc/net/ip_vs rather than a dump each: measured in the test VM,
// the table read costs as much as the dumps at ~20k and is 4x cheaper at 5k.
const tableReadMax = 5000

// readKernel reads the IPv4 virtual servers with their real servers, the
// dummy link's addresses and our ipsets' entries. Besides the kernel it
// reads only handles, immutable fields, the plan beginRead and planShare
// made and, holding the plan's lock, the sets' believed counts, so it may
// run on another goroutine while apply writes.
func (r *reconciler) readKernel() (*kernelView, error) {
	v := &kernelView{
		vs: map[ipvs.Key]ipvs.VirtualServer{}, rs: map[ipvs.Key]*realSet{},
		addr: map[netip.Addr]bool{}, entry: map[setEntry]bool{},
	}
	start := time.Now()
	lap := func(d *time.Duration) { now := time.Now(); *d, start = now.Sub(start), now }
	if r.plan.believed != nil {
		if err := r.readShare(v); err != nil {
			return nil, err
		}
		lap(&v.took.realServers)
		return r.readMembers(v, lap)
	}
	list, err := r.ipvs.VirtualServers()
	if err != nil {
		return nil, err
	}
	lap(&v.took.virtualServers)
	// A small table's real servers in one read; what it misses, and a large
	// table's planned share, a dump per virtual server (see ipvs.TableReader).
	// A failed table read costs time, not correctness.
	var table map[ipvs.Key][]ipvs.RealServer
	if t, ok := r.ipvs.(ipvs.TableReader); ok && len(list) <= tableReadMax {
		table, _ = t.AllRealServers()
	}
	for _, vs := range list {
		if !vs.Address.Is4() {
			continue
		}
		v.vs[vs.Key] = vs
		reals, ok := table[vs.Key]
		if !ok {
			if table == nil && !r.plan.covers(vs.Key) {
				continue
			}
			// None if deleted since the list was read; the next check sees it gone.
			if reals, err = r.dumpRealServers(vs.Key); err != nil {
				return nil, err
			}
		}
		v.rs[vs.Key] = newRealSet(reals)
		v.realServersOf++
	}
	lap(&v.took.realServers)
	return r.readMembers(v, lap)
}

// dumpRealServers and getVirtualServer are a drift check's
// per-virtual-server requests, each made after any write that is waiting
// (see writesFirst).
func (r *reconciler) dumpRealServers(k ipvs.Key) ([]ipvs.RealServer, error) {
	r.writesFirst.RLock()
	defer r.writesFirst.RUnlock()
	return r.ipvs.RealServers(k)
}

func (r *reconciler) getVirtualServer(k ipvs.Key) (ipvs.VirtualServer, bool, error) {
	r.writesFirst.RLock()
	defer r.writesFirst.RUnlock()
	return r.ipvs.GetVirtualServer(k)
}

// readShare reads the virtual servers of the plan's share without listing
// them all: a real-server dump each, which is empty for a missing one, and
// a request for the virtual server itself where an empty answer is what
// the belief expects, to tell the two apart.
func (r *reconciler) readShare(v *kernelView) error {
	v.only = r.plan.believed
	for k, b := range r.plan.believed {
		reals, err := r.dumpRealServers(k)
		if err != nil {
			return err
		}
		vs := b.vs
		if len(reals) == 0 && !b.reals {
			got, ok, err := r.getVirtualServer(k)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			vs = got
		}
		// Believed present; an unexpected empty answer shows as a
		// difference, and adopt confirms it with a request of its own.
		v.vs[k] = vs
		v.rs[k] = newRealSet(reals)
		v.realServersOf++
	}
	return nil
}

// readMembers reads the dummy link's addresses and our ipsets' entries into
// v, and returns v, or nil if a read failed.
func (r *reconciler) readMembers(v *kernelView, lap func(*time.Duration)) (*kernelView, error) {
	addrs, err := r.addrs.Addresses()
	if err != nil {
		return nil, err
	}
	lap(&v.took.addresses)
	for _, a := range addrs {
		if a.Is4() {
			v.addr[a] = true
		}
	}
	for _, name := range r.setNames {
		if r.plan.counts != nil {
			r.plan.counts.Lock()
			n, err := r.sets.Count(name)
			believed := r.entryCount[name]
			r.plan.counts.Unlock()
			if err != nil {
				return nil, err
			}
			if n == believed {
				if v.unreadSets == nil {
					v.unreadSets = map[string]bool{}
				}
				v.unreadSets[name] = true
				continue
			}
		}
		entries, err := r.sets.Entries(name)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			v.entry[setEntry{name, e}] = true
		}
	}
	lap(&v.took.sets)
	return v, nil
}

// refresh reads the kernel, adopts it and drains, on the calling goroutine.
func (r *reconciler) refresh() error {
	r.beginRead()
	r.planShare(noLock{})
	v, err := r.readKernel()
	if err != nil {
		r.written = nil
		return err
	}
	w, err := r.adopt(v, noLock{})
	return errors.Join(append(r.drain(v, w), err)...)
}

// Record a write, if a kernel read is in flight.
func (r *reconciler) wroteVS(k ipvs.Key) {
	if r.written != nil {
		r.written.vs[k] = true
	}
}

func (r *reconciler) wroteAddr(a netip.Addr) {
	if r.written != nil {
		r.written.addr[a] = true
	}
}

func (r *reconciler) wroteEntry(e setEntry) {
	if r.written != nil {
		r.written.entry[e] = true
	}
}

// apply makes the kernel match the desired state for every dirty key, in
// batches: the writes of each kind go to the kernel together (package
// nlbatch puts many in one system call). The three kinds are written side
// by side: each goes to a kernel subsystem behind a lock of its own (RTNL,
// ipset's, IPVS's), through a socket of its own, and the reconciler keeps
// a separate belief for each, which only its lane touches. At 10k Services
// a cold start wrote 3.5 s of addresses, then 0.6 s of entries, then 2.8 s
// of virtual servers in the test VM, one after the other. A key whose
// kernel write fails stays dirty, and its object's status (see statusTable)
// says when an apply retries it. The errors are this apply's failed writes.
func (r *reconciler) apply() []error {
	r.writesFirst.Lock()
	defer r.writesFirst.Unlock()
	var addrs, entries lane
	var wg sync.WaitGroup
	wg.Go(func() { addrs = writeLane(r.writeAddresses, &r.dirtyAddr) })
	wg.Go(func() { entries = writeLane(r.writeEntries, &r.dirtyEntry) })
	start := time.Now()
	vsErrs := r.syncVirtualServers()
	r.applied.virtualServers += time.Since(start)
	wg.Wait()
	r.ops += addrs.ops + entries.ops
	r.applied.addresses += addrs.took
	r.applied.entries += entries.took
	return slices.Concat(addrs.errs, entries.errs, vsErrs)
}

// lane is what writing one kind of kernel object did in an apply.
type lane struct {
	errs []error
	ops  int
	took time.Duration
}

// writeLane is apply's lane for one kind of member (addresses, ipset
// entries): additions first, so new Services answer as early as possible,
// then removals. What failed or waits for its retry stays dirty: the dirty
// set is replaced by those keys rather than emptied, as a map keeps the size it once had, and a
// cold start's dirty sets are the cluster.
func writeLane[K comparable](write func(add bool, retry map[K]bool) (int, []error), dirty *map[K]bool) lane {
	start := time.Now()
	retry := map[K]bool{}
	added, errs := write(true, retry)
	removed, more := write(false, retry)
	*dirty = retry
	return lane{errs: append(errs, more...), ops: added + removed, took: time.Since(start)}
}

// writeAddresses binds the dirty addresses that are wanted and missing
// (add) or unbinds those bound and unwanted, and says how many it wrote.
// Failed writes go to retry.
func (r *reconciler) writeAddresses(add bool, retry map[netip.Addr]bool) (int, []error) {
	now := r.now()
	var addrs []netip.Addr
	for a := range r.dirtyAddr {
		switch _, want := r.wantAddr.get(a); {
		case want != add: // the other pass's
		case r.haveAddr[a] == add:
			r.addrStatus.ok(a)
		case r.addrStatus.waiting(a, now):
			retry[a] = true
		default:
			addrs = append(addrs, a)
		}
	}
	write := r.addrs.DeleteAddresses
	if add {
		write = r.addrs.AddAddresses
	}
	var errs []error
	n := 0
	for i, err := range write(addrs) {
		a := addrs[i]
		r.wroteAddr(a)
		if err != nil {
			errs = append(errs, err)
			retry[a] = true
			r.addrStatus.fail(a, err, now, r.retryMax, r.wantAddr.owner(a))
			continue
		}
		r.addrStatus.ok(a)
		n++
		if add {
			r.haveAddr[a] = true
		} else {
			delete(r.haveAddr, a)
		}
	}
	return n, errs
}

// writeEntries adds the dirty entries that are wanted and missing (add) or
// deletes those present and unwanted, a batch per set, and says how many it
// wrote. Failed writes go to retry.
func (r *reconciler) writeEntries(add bool, retry map[setEntry]bool) (int, []error) {
	now := r.now()
	bySet := map[string][]ipset.Entry{}
	for e := range r.dirtyEntry {
		switch _, want := r.wantEntry.get(e); {
		case want != add: // the other pass's
		case r.haveEntry[e] == add:
			r.entryStatus.ok(e)
		case r.entryStatus.waiting(e, now):
			retry[e] = true
		default:
			bySet[e.set] = append(bySet[e.set], e.entry)
		}
	}
	var errs []error
	n := 0
	for set, entries := range bySet {
		write := r.sets.DeleteEntries
		if add {
			write = r.sets.AddEntries
		}
		for i, err := range write(set, entries) {
			e := setEntry{set, entries[i]}
			r.wroteEntry(e)
			if err != nil {
				errs = append(errs, err)
				retry[e] = true
				r.entryStatus.fail(e, err, now, r.retryMax, r.wantEntry.owner(e))
				continue
			}
			r.entryStatus.ok(e)
			n++
			r.believeEntry(e, add)
		}
	}
	return n, errs
}

// believeEntry records whether the kernel holds e.
func (r *reconciler) believeEntry(e setEntry, present bool) {
	switch {
	case present && !r.haveEntry[e]:
		r.haveEntry[e] = true
		r.entryCount[e.set]++
	case !present && r.haveEntry[e]:
		delete(r.haveEntry, e)
		r.entryCount[e.set]--
	}
}

func (r *reconciler) believeAddr(a netip.Addr, present bool) {
	if present {
		r.haveAddr[a] = true
	} else {
		delete(r.haveAddr, a)
	}
}

// readServices reads what the named Services want from the kernel into the
// reconciler's belief: their virtual servers with their real servers, their
// addresses and their ipset entries. Before the first drift check has read
// the whole kernel, it is what lets a few Services be written safely: adding
// a virtual server that exists fails, stale real servers must be seen to be
// removed, and objects in place must not be written again.
func (r *reconciler) readServices(names []types.NamespacedName) error {
	var bound map[netip.Addr]bool
	for _, n := range names {
		st := r.byService[n]
		for _, v := range st.virtualServers {
			if err := r.readVirtualServer(v.vs.Key); err != nil {
				return err
			}
		}
		if len(st.addresses) > 0 && bound == nil {
			addrs, err := r.addrs.Addresses()
			if err != nil {
				return err
			}
			bound = make(map[netip.Addr]bool, len(addrs))
			for _, a := range addrs {
				bound[a] = true
			}
		}
		for _, a := range st.addresses {
			r.haveAddr[a] = bound[a]
		}
		for _, e := range st.entries {
			ok, err := r.sets.Has(e.set, e.entry)
			if err != nil {
				return err
			}
			r.believeEntry(e, ok)
		}
	}
	return nil
}

func (r *reconciler) readVirtualServer(k ipvs.Key) error {
	rd, err := r.readOne(k)
	if err != nil {
		return err
	}
	if !rd.present {
		delete(r.haveVS, k)
		delete(r.haveRS, k)
		return nil
	}
	r.haveVS[k], r.haveRS[k] = rd.vs, rd.rs
	return nil
}

// criticalDirty collects the dirty objects the named Services want.
func (r *reconciler) criticalDirty(names []types.NamespacedName) (map[ipvs.Key]bool, map[netip.Addr]bool, map[setEntry]bool) {
	vs, addr, entry := map[ipvs.Key]bool{}, map[netip.Addr]bool{}, map[setEntry]bool{}
	for _, n := range names {
		st := r.byService[n]
		for _, v := range st.virtualServers {
			if r.dirtyVS[v.vs.Key] {
				vs[v.vs.Key] = true
			}
		}
		for _, a := range st.addresses {
			if r.dirtyAddr[a] {
				addr[a] = true
			}
		}
		for _, e := range st.entries {
			if r.dirtyEntry[e] {
				entry[e] = true
			}
		}
	}
	return vs, addr, entry
}

// applyFirst applies the dirty objects of the named Services alone and says
// how many there were; the rest stays dirty for the next apply, as do objects
// whose write failed.
func (r *reconciler) applyFirst(names []types.NamespacedName) (int, []error) {
	vs, addr, entry := r.criticalDirty(names)
	n := len(vs) + len(addr) + len(entry)
	if n == 0 {
		return 0, nil
	}
	restVS, restAddr, restEntry := r.dirtyVS, r.dirtyAddr, r.dirtyEntry
	for k := range vs {
		delete(restVS, k)
	}
	for a := range addr {
		delete(restAddr, a)
	}
	for e := range entry {
		delete(restEntry, e)
	}
	r.dirtyVS, r.dirtyAddr, r.dirtyEntry = vs, addr, entry
	errs := r.apply()
	for k := range r.dirtyVS {
		restVS[k] = true
	}
	for a := range r.dirtyAddr {
		restAddr[a] = true
	}
	for e := range r.dirtyEntry {
		restEntry[e] = true
	}
	r.dirtyVS, r.dirtyAddr, r.dirtyEntry = restVS, restAddr, restEntry
	return n, errs
}

// syncVirtualServers makes the dirty virtual servers and their real
// servers match, in batches of writes. A virtual server stays dirty while a
// write of its own or of a real server failed or waits for its retry.
func (r *reconciler) syncVirtualServers() []error {
	now := r.now()
	pending := map[ipvs.Key]bool{}
	var errs []error
	write := func(ops []ipvs.Op) {
		// A virtual server whose add failed takes its real servers' adds
		// down with it: those are not failures of their own.
		var addFailed map[ipvs.Key]bool
		for i, err := range r.ipvs.Write(ops) {
			op := ops[i]
			k := op.VS.Key
			if err == nil {
				r.ops++
				r.wroteVS(k)
				r.believe(op)
				r.opOK(op)
				continue
			}
			pending[k] = true
			if addFailed[k] {
				continue
			}
			errs = append(errs, err)
			if op.Kind == ipvs.AddVS {
				if addFailed == nil {
					addFailed = map[ipvs.Key]bool{}
				}
				addFailed[k] = true
			}
			r.opFailed(op, err, now)
		}
	}
	// Written a few thousand at a time: a cold start's 140k ops at once
	// held 30 MB of plans at the peak, for no fewer system calls.
	ops := make([]ipvs.Op, 0, opsPerWrite)
	for k := range r.dirtyVS {
		var deferred bool
		if ops, deferred = r.planVirtualServer(k, ops, now); deferred {
			pending[k] = true
		}
		if len(ops) >= opsPerWrite {
			write(ops)
			ops = ops[:0]
		}
	}
	write(ops)
	r.dirtyVS = pending
	return errs
}

// opOK and opFailed record the outcome of an IPVS write in its object's
// status.
func (r *reconciler) opOK(op ipvs.Op) {
	switch op.Kind {
	case ipvs.AddVS, ipvs.UpdateVS:
		r.vsStatus.ok(op.VS.Key)
	case ipvs.DeleteVS:
		r.vsStatus.ok(op.VS.Key)
		r.forgetRealServers(op.VS.Key)
	default:
		r.rsStatus.ok(op.VS.Key, op.RS.ID())
	}
}

func (r *reconciler) opFailed(op ipvs.Op, err error, now time.Time) {
	owner := r.wantVS.owner(op.VS.Key)
	switch op.Kind {
	case ipvs.AddVS, ipvs.UpdateVS, ipvs.DeleteVS:
		r.vsStatus.fail(op.VS.Key, err, now, r.retryMax, owner)
	default:
		r.rsStatus.fail(op.VS.Key, op.RS.ID(), err, now, r.retryMax, owner)
	}
}

// forgetRealServers drops the failures of a virtual server's real servers
// once the virtual server is gone.
func (r *reconciler) forgetRealServers(k ipvs.Key) {
	r.rsStatus.forget(k)
}

// opsPerWrite is how many IPVS writes syncVirtualServers plans before it
// sends them: a few netlink batches' worth.
const opsPerWrite = 4096

// planVirtualServer appends the writes that make one virtual server and its
// real servers match the desired state, as the reconciler believes the
// kernel is, leaving out those whose retry is not due (deferred says some
// were). Unwanted TCP real servers are not deleted but drained: weight 0
// until their connections end.
func (r *reconciler) planVirtualServer(k ipvs.Key, ops []ipvs.Op, now time.Time) (_ []ipvs.Op, deferred bool) {
	want, wanted := r.wantVS.get(k)
	have, exists := r.haveVS[k]
	vsOp := ipvs.Op{VS: want.vs}
	switch {
	case !wanted && !exists:
		r.vsStatus.ok(k)
		r.forgetRealServers(k)
		return ops, false
	case !wanted:
		vsOp = ipvs.Op{Kind: ipvs.DeleteVS, VS: have}
	case !exists:
		vsOp.Kind = ipvs.AddVS
	case have != want.vs:
		vsOp.Kind = ipvs.UpdateVS
	default:
		r.vsStatus.ok(k)
	}
	if vsOp.Kind != 0 {
		if r.vsStatus.waiting(k, now) {
			return ops, true
		}
		ops = append(ops, vsOp)
	}
	if !wanted {
		return ops, false
	}
	rsOp := func(kind ipvs.OpKind, rs ipvs.RealServer) {
		if r.rsStatus.waiting(k, rs.ID(), now) {
			deferred = true
			return
		}
		ops = append(ops, ipvs.Op{Kind: kind, VS: want.vs, RS: rs})
	}
	haveRS := r.haveRS[k]
	wantedRS := make(map[netip.AddrPort]bool, len(want.real))
	for _, rs := range want.real {
		id := rs.ID()
		wantedRS[id] = true
		cur, ok := haveRS.get(id)
		switch {
		case !ok:
			rsOp(ipvs.AddRS, rs)
		case cur.Weight != rs.Weight:
			rsOp(ipvs.UpdateRS, rs)
		default:
			r.rsStatus.ok(k, id)
		}
		if d := r.draining[k]; d != nil {
			delete(d, id)
		}
	}
	for _, cur := range haveRS.members() {
		id := cur.ID()
		if wantedRS[id] {
			continue
		}
		if k.Protocol != ipvs.TCP {
			// Datagram protocols have no connection end to wait for.
			rsOp(ipvs.DeleteRS, cur)
			continue
		}
		if cur.Weight != 0 {
			cur.Weight = 0
			rsOp(ipvs.UpdateRS, cur)
		}
		if r.draining[k] == nil {
			r.draining[k] = map[netip.AddrPort]bool{}
		}
		r.draining[k][id] = true
	}
	// A real server that failed and is now neither wanted nor present
	// needs nothing more.
	if t := r.rsStatus.of(k); t != nil {
		for id := range t.failed {
			if _, present := haveRS.get(id); !wantedRS[id] && !present {
				r.rsStatus.ok(k, id)
			}
		}
	}
	return ops, deferred
}

// believe records a write the kernel accepted.
func (r *reconciler) believe(op ipvs.Op) {
	k := op.VS.Key
	switch op.Kind {
	case ipvs.AddVS:
		r.haveVS[k] = op.VS
		// Sized for the real servers to come: grown by append, a set of
		// ten would hold room for sixteen, at every virtual server.
		want, _ := r.wantVS.get(k)
		r.haveRS[k] = newRealSet(make([]ipvs.RealServer, 0, len(want.real)))
	case ipvs.UpdateVS:
		r.haveVS[k] = op.VS
	case ipvs.DeleteVS:
		delete(r.haveVS, k)
		delete(r.haveRS, k)
		delete(r.draining, k)
	case ipvs.AddRS, ipvs.UpdateRS:
		set := r.haveRS[k]
		if set == nil {
			set = newRealSet(nil)
			r.haveRS[k] = set
		}
		cur, ok := set.get(op.RS.ID())
		if !ok {
			cur = op.RS
		}
		cur.Weight = op.RS.Weight
		set.put(cur)
	case ipvs.DeleteRS:
		r.haveRS[k].remove(op.RS.ID())
	}
}

// drain deletes weight-0 real servers whose connections had ended when the
// kernel was read, from the read's counters: no request per virtual server on
// the sync goroutine. Virtual servers written during the read wait for the
// next drift check, as their counters may predate the write.
func (r *reconciler) drain(v *kernelView, written *writtenKeys) []error {
	var ops []ipvs.Op
	for k, ids := range r.draining {
		seen, read := v.rs[k]
		if written.vs[k] || !read {
			continue
		}
		for id := range ids {
			rs, ok := seen.get(id)
			if !ok {
				delete(ids, id)
				r.haveRS[k].remove(id)
				continue
			}
			if rs.ActiveConns+rs.InactiveConns == 0 {
				ops = append(ops, ipvs.Op{Kind: ipvs.DeleteRS, VS: ipvs.VirtualServer{Key: k}, RS: rs})
			}
		}
		if len(ids) == 0 {
			delete(r.draining, k)
		}
	}
	var errs []error
	for i, err := range r.ipvs.Write(ops) {
		k, id := ops[i].VS.Key, ops[i].RS.ID()
		r.wroteVS(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("drain: %w", err))
			r.rsStatus.fail(k, id, err, r.now(), r.retryMax, r.wantVS.owner(k))
			continue
		}
		r.rsStatus.ok(k, id)
		r.ops++
		r.haveRS[k].remove(id)
		if ids := r.draining[k]; ids != nil {
			delete(ids, id)
			if len(ids) == 0 {
				delete(r.draining, k)
			}
		}
	}
	return errs
}
