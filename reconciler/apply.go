package reconciler

import (
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

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
func (r *Reconciler) apply() []error { return r.write(nil) }

// write is apply for every dirty key, or, given first, for those keys alone.
func (r *Reconciler) write(first *priority) []error {
	r.writesFirst.Lock()
	defer r.writesFirst.Unlock()
	vsKeys, addrKeys, entryKeys := allKeys(&r.vs.dirty), allKeys(&r.addr.dirty), allKeys(&r.entry.dirty)
	if first != nil {
		vsKeys.only, addrKeys.only, entryKeys.only = &first.vs, &first.addr, &first.entry
	}
	var addrs, entries lane
	var wg sync.WaitGroup
	wg.Go(func() { addrs = writeLane(r.writeAddresses, addrKeys) })
	wg.Go(func() { entries = writeLane(r.writeEntries, entryKeys) })
	start := time.Now()
	vsErrs := r.syncVirtualServers(vsKeys)
	r.done.Times.VirtualServers += time.Since(start)
	wg.Wait()
	r.done.Ops += addrs.ops + entries.ops
	r.done.Times.Addresses += addrs.took
	r.done.Times.Entries += entries.took
	return slices.Concat(addrs.errs, entries.errs, vsErrs)
}

// lane is what writing one kind of kernel object did in an apply.
type lane struct {
	errs []error
	ops  int
	took time.Duration
}

// keys are the keys of one kind an apply looks at: every dirty key, or only
// a priority few of them (the critical Services').
type keys[K comparable] struct {
	dirty *map[K]bool
	only  *[]K // nil: all of *dirty
}

func allKeys[K comparable](dirty *map[K]bool) keys[K] { return keys[K]{dirty: dirty} }

func (k keys[K]) each() iter.Seq[K] {
	if k.only == nil {
		return maps.Keys(*k.dirty)
	}
	return slices.Values(*k.only)
}

// settle leaves dirty of the keys looked at exactly those pending. After
// looking at all, the dirty set is replaced by pending rather than emptied:
// a map keeps the size it once had, and a cold start's dirty sets are the
// cluster.
func (k keys[K]) settle(pending map[K]bool) {
	if k.only == nil {
		*k.dirty = pending
		return
	}
	for _, key := range *k.only {
		if !pending[key] {
			delete(*k.dirty, key)
		}
	}
}

// writeLane is apply's lane for one kind of member (addresses, ipset
// entries): additions first, so new Services answer as early as possible,
// then removals. What failed or waits for its retry stays dirty.
func writeLane[K comparable](write func(add bool, keys iter.Seq[K], retry map[K]bool) (int, []error), k keys[K]) lane {
	start := time.Now()
	retry := map[K]bool{}
	added, errs := write(true, k.each(), retry)
	removed, more := write(false, k.each(), retry)
	k.settle(retry)
	return lane{errs: append(errs, more...), ops: added + removed, took: time.Since(start)}
}

// memberTable is a kind of object that is only present or absent in the
// kernel (addresses, ipset entries).
type memberTable[K comparable] = table[K, struct{}, struct{}]

// pick returns the keys one pass writes: with add, the wanted ones the
// kernel lacks, else the unwanted ones it holds. Keys already as wanted are
// done; those whose retry is not due go to retry.
func pick[K comparable](t *memberTable[K], add bool, dirty iter.Seq[K], now time.Time, retry map[K]bool) []K {
	var keys []K
	for k := range dirty {
		_, want := t.want[k]
		_, held := t.have[k]
		switch {
		case want != add: // the other pass's
		case held == add:
			t.status.OK(k)
		case t.status.Waiting(k, now):
			retry[k] = true
		default:
			keys = append(keys, k)
		}
	}
	return keys
}

// takeAnswers takes the kernel's answer to writing keys: a key written is
// believed and done, a key refused goes to retry with its failure. Keys
// whose answer was lost are read back with held first (see readback.go):
// those the kernel holds as asked count as written. It returns how many
// were written and the errors.
func takeAnswers[K comparable](t *memberTable[K], keys []K, results []error, add bool, now time.Time, retry map[K]bool,
	held func([]K) (map[K]bool, error)) (int, []error) {
	var unknown []K
	for i, err := range results {
		if err != nil && unknownOutcome(err) {
			unknown = append(unknown, keys[i])
		}
	}
	var seen map[K]bool
	if len(unknown) > 0 {
		seen, _ = held(unknown) // what it could not read stays failed
	}
	var errs []error
	n := 0
	for i, err := range results {
		k := keys[i]
		t.wrote(k)
		if present, read := seen[k]; err != nil && read && present == add {
			err = nil
		}
		if err != nil {
			errs = append(errs, err)
			retry[k] = true
			t.status.Fail(k, err, now, t.want.owner(k))
			continue
		}
		t.status.OK(k)
		believeIf(t, k, add)
		n++
	}
	return n, errs
}

// writeAddresses binds the dirty addresses that are wanted and missing
// (add) or unbinds those bound and unwanted, and says how many it wrote.
// Failed writes go to retry.
func (r *Reconciler) writeAddresses(add bool, dirty iter.Seq[netip.Addr], retry map[netip.Addr]bool) (int, []error) {
	now := r.now()
	addrs := pick(&r.addr, add, dirty, now, retry)
	write := r.addrs.DeleteAddresses
	if add {
		write = r.addrs.AddAddresses
	}
	return takeAnswers(&r.addr, addrs, write(addrs), add, now, retry, r.boundOf)
}

// writeEntries adds the dirty entries that are wanted and missing (add) or
// deletes those present and unwanted, a batch per set, and says how many it
// wrote. Failed writes go to retry.
func (r *Reconciler) writeEntries(add bool, dirty iter.Seq[desired.SetEntry], retry map[desired.SetEntry]bool) (int, []error) {
	now := r.now()
	bySet := map[string][]desired.SetEntry{}
	for _, e := range pick(&r.entry, add, dirty, now, retry) {
		bySet[e.Set] = append(bySet[e.Set], e)
	}
	write := r.sets.DeleteEntries
	if add {
		write = r.sets.AddEntries
	}
	var errs []error
	n := 0
	for set, keys := range bySet {
		if add {
			if err := r.ensureCapacity(set, len(keys)); err != nil {
				// The adds are tried all the same: those that fit are written.
				errs = append(errs, err)
			}
		}
		entries := make([]ipset.Entry, len(keys))
		for i, k := range keys {
			entries[i] = k.Entry
		}
		written, failed := takeAnswers(&r.entry, keys, write(set, entries), add, now, retry, r.entriesHeld)
		n += written
		errs = append(errs, failed...)
	}
	return n, errs
}

// priority is the dirty keys of a few Services, written before the others.
type priority struct {
	vs    []ipvs.Key
	addr  []netip.Addr
	entry []desired.SetEntry
}

// dirtyOf collects the dirty keys the named Services want.
func (r *Reconciler) dirtyOf(names []types.NamespacedName) priority {
	var p priority
	vs, addr, entry := dirtyList[ipvs.Key]{}, dirtyList[netip.Addr]{}, dirtyList[desired.SetEntry]{}
	for _, n := range names {
		st := r.byService[n]
		for _, v := range st.VirtualServers {
			p.vs = vs.add(p.vs, r.vs.dirty, v.Virtual.Key)
		}
		for _, a := range st.Addresses {
			p.addr = addr.add(p.addr, r.addr.dirty, a)
		}
		for _, e := range st.Entries {
			p.entry = entry.add(p.entry, r.entry.dirty, e)
		}
	}
	return p
}

// dirtyList is the keys already in a priority list: Services may share an
// address or an entry, and one Service may have 90,300 virtual servers.
type dirtyList[K comparable] map[K]bool

// add appends k to list if it is dirty and not yet there.
func (seen dirtyList[K]) add(list []K, dirty map[K]bool, k K) []K {
	if dirty[k] && !seen[k] {
		seen[k] = true
		return append(list, k)
	}
	return list
}

// applyFirst applies the dirty objects of the named Services alone and says
// how many there were; the rest stays dirty for the next apply, as do
// objects whose write failed or waits for its retry.
func (r *Reconciler) applyFirst(names []types.NamespacedName) (int, []error) {
	first := r.dirtyOf(names)
	n := len(first.vs) + len(first.addr) + len(first.entry)
	if n == 0 {
		return 0, nil
	}
	return n, r.write(&first)
}

// syncVirtualServers makes the dirty virtual servers and their real
// servers match, in batches of writes. A virtual server stays dirty while a
// write of its own or of a real server failed or waits for its retry.
func (r *Reconciler) syncVirtualServers(dirty keys[ipvs.Key]) []error {
	now := r.now()
	pending := map[ipvs.Key]bool{}
	var errs []error
	write := func(ops []ipvs.Op) {
		// A virtual server whose add failed takes its real servers' adds
		// down with it: those are not failures of their own.
		var addFailed map[ipvs.Key]bool
		results := r.ipvs.Write(ops)
		back := r.readBackVirtualServers(ops, results)
		for i, err := range results {
			op := ops[i]
			k := op.VS.Key
			if err != nil && back[k].holds(op) {
				err = nil // the kernel holds what was asked
			}
			if err == nil {
				r.done.Ops++
				r.vs.wrote(k)
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
		for k, rb := range back {
			r.takeReadBack(k, rb)
		}
	}
	// Written a few thousand at a time: a cold start's 140k ops at once
	// held 30 MB of plans at the peak, for no fewer system calls. Deletes
	// wait until every add and update of the sync is written: the kernel
	// parks a deleted real server in its dest trash for minutes and looks
	// each new one up there first, so adds after many deletes are
	// quadratic (docs/performance.md).
	ops := make([]ipvs.Op, 0, opsPerWrite)
	var deletes []ipvs.Op
	writeAddsAndUpdates := func() {
		kept := ops[:0]
		for _, op := range ops {
			if op.Kind == ipvs.DeleteRS || op.Kind == ipvs.DeleteVS {
				deletes = append(deletes, op)
			} else {
				kept = append(kept, op)
			}
		}
		write(kept)
		ops = ops[:0]
	}
	for k := range dirty.each() {
		var deferred bool
		if ops, deferred = r.planVirtualServer(k, ops, now); deferred {
			pending[k] = true
		}
		if len(ops) >= opsPerWrite {
			writeAddsAndUpdates()
		}
	}
	writeAddsAndUpdates()
	for chunk := range slices.Chunk(deletes, opsPerWrite) {
		write(chunk)
	}
	dirty.settle(pending)
	r.clearStaleFlows()
	return errs
}

// clearStaleFlows deletes the conntrack entries of UDP flows whose real
// server went, once IPVS no longer sends to it. A failure is reported and
// not retried: such entries also end by timing out.
func (r *Reconciler) clearStaleFlows() {
	if len(r.flows.pending) == 0 || r.flows.conntrack == nil {
		r.flows.pending = nil
		return
	}
	// One pass over each family's table, for its flows alone.
	for _, fam := range desired.Families {
		var stale []conntrack.Stale
		for _, s := range r.flows.pending {
			if fam.Holds(s.VIP.Addr()) {
				stale = append(stale, s)
			}
		}
		if len(stale) == 0 {
			continue
		}
		n, err := r.flows.conntrack.Clear(stale)
		r.done.ConntrackCleared[fam] += n
		if err != nil {
			r.done.ConntrackErr = fmt.Errorf("delete conntrack entries of %d %s UDP virtual servers: %w", len(stale), fam, err)
		}
	}
	r.flows.pending = nil
}

// opOK and opFailed record the outcome of an IPVS write in its object's
// status.
func (r *Reconciler) opOK(op ipvs.Op) {
	switch op.Kind {
	case ipvs.AddVS, ipvs.UpdateVS:
		r.vs.status.OK(op.VS.Key)
	case ipvs.DeleteVS:
		r.vs.status.OK(op.VS.Key)
		r.rsStatus.forget(op.VS.Key)
	default:
		r.rsStatus.ok(op.VS.Key, op.RS.ID())
	}
}

func (r *Reconciler) opFailed(op ipvs.Op, err error, now time.Time) {
	owner := r.vs.want.owner(op.VS.Key)
	switch op.Kind {
	case ipvs.AddVS, ipvs.UpdateVS, ipvs.DeleteVS:
		r.vs.status.Fail(op.VS.Key, err, now, owner)
	default:
		r.rsStatus.fail(op.VS.Key, op.RS.ID(), err, now, owner)
	}
}

// opsPerWrite is how many IPVS writes syncVirtualServers plans before it
// sends them: a few netlink batches' worth.
const opsPerWrite = 4096

// planVirtualServer appends the writes that make one virtual server and its
// real servers match the desired state, as the reconciler believes the
// kernel is, leaving out those whose retry is not due (deferred says some
// were). An unwanted TCP real server that carries connections is drained
// (weight 0 until they end); one that carries none is deleted (see drain.go).
func (r *Reconciler) planVirtualServer(k ipvs.Key, ops []ipvs.Op, now time.Time) (_ []ipvs.Op, deferred bool) {
	want, wanted := r.vs.want.get(k)
	have, exists := r.vs.have[k]
	drainsWhole := !wanted && exists && r.drainsWhole(k, have)
	if drainsWhole {
		want = desired.VirtualServer{Virtual: have.vs} // no real server wanted
	}
	vsOp := ipvs.Op{VS: want.Virtual}
	switch {
	case !wanted && !exists:
		r.vs.status.OK(k)
		r.rsStatus.forget(k)
		return ops, false
	case drainsWhole:
		r.vs.status.OK(k)
	case !wanted:
		vsOp = ipvs.Op{Kind: ipvs.DeleteVS, VS: have.vs}
	case !exists:
		vsOp.Kind = ipvs.AddVS
	case have.vs != want.Virtual:
		vsOp.Kind = ipvs.UpdateVS
	default:
		r.vs.status.OK(k)
	}
	if vsOp.Kind != 0 {
		if r.vs.status.Waiting(k, now) {
			return ops, true
		}
		ops = append(ops, vsOp)
	}
	if !wanted && !drainsWhole {
		return ops, false
	}
	rsOp := func(kind ipvs.OpKind, rs ipvs.RealServer) {
		if r.rsStatus.waiting(k, rs.ID(), now) {
			deferred = true
			return
		}
		ops = append(ops, ipvs.Op{Kind: kind, VS: want.Virtual, RS: rs})
	}
	haveRS := have.reals
	// Removing a UDP real server while others serve leaves conntrack
	// entries answered by it (see package conntrack).
	staleUDP := false
	wantedRS := make(map[netip.AddrPort]bool, len(want.Reals))
	for _, rs := range want.Reals {
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
		if d := r.draining.reals[k]; d != nil {
			delete(d, id)
			if len(d) == 0 {
				delete(r.draining.reals, k)
			}
		}
	}
	var conns *realSet
	connsRead := false
	for _, cur := range haveRS.members() {
		id := cur.ID()
		if wantedRS[id] {
			continue
		}
		if k.Protocol != ipvs.TCP {
			// Datagram protocols have no connection end to wait for.
			rsOp(ipvs.DeleteRS, cur)
			staleUDP = staleUDP || (k.Protocol == ipvs.UDP && len(want.Reals) > 0)
			continue
		}
		if !r.draining.reals[k][id] {
			// A drain would start: only what carries connections drains
			// (see drain.go).
			if !connsRead {
				conns, connsRead = r.connectionsOf(k), true
			}
			if rs, ok := conns.get(id); conns != nil && (!ok || !connected(rs)) {
				rsOp(ipvs.DeleteRS, cur)
				continue
			}
		}
		if cur.Weight != 0 {
			cur.Weight = 0
			rsOp(ipvs.UpdateRS, cur)
		}
		if r.draining.reals[k] == nil {
			r.draining.reals[k] = map[netip.AddrPort]bool{}
		}
		r.draining.reals[k][id] = true
	}
	if staleUDP {
		r.flows.pending = append(r.flows.pending, conntrack.Stale{VIP: netip.AddrPortFrom(k.Address, k.Port), Keep: slices.Collect(maps.Keys(wantedRS))})
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
