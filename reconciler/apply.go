package reconciler

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/netip"
	"slices"
	"sync"

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
// kernel write fails stays dirty, and its object's status (a status.Table)
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
	now := r.now()
	var addrs, entries lane
	var wg sync.WaitGroup
	wg.Go(func() { addrs = writeKind(r.addresses(), addrKeys, now) })
	wg.Go(func() { entries = writeKind(r.entries(), entryKeys, now) })
	r.prepare(vsKeys, now)
	vs := writeKind(virtualServers{r}, vsKeys, now)
	r.clearStaleFlows()
	wg.Wait()
	r.done.Ops += vs.ops + addrs.ops + entries.ops
	r.done.Times.VirtualServers += vs.took
	r.done.Times.Addresses += addrs.took
	r.done.Times.Entries += entries.took
	return slices.Concat(addrs.errs, entries.errs, vs.errs)
}

// addresses is the kind of the address table: VIPs bound to kube-ipvs0.
func (r *Reconciler) addresses() members[netip.Addr] {
	return members[netip.Addr]{t: &r.addr, held: r.boundOf,
		send: func(addrs []netip.Addr, removals bool) ([]error, error) {
			if removals {
				return r.addrs.DeleteAddresses(addrs), nil
			}
			return r.addrs.AddAddresses(addrs), nil
		}}
}

// entries is the kind of the entry table: ipset entries, written a batch
// per set. An add grows its set first if it would overfill it (grow.go);
// the adds are tried all the same if that fails: those that fit are written.
func (r *Reconciler) entries() members[desired.SetEntry] {
	missing := r.missingSets
	return members[desired.SetEntry]{t: &r.entry, held: r.entriesHeld,
		waits: func(e desired.SetEntry) bool { return missing[e.Set] },
		send: func(keys []desired.SetEntry, removals bool) ([]error, error) {
			answers := make([]error, len(keys))
			bySet := map[string][]int{}
			for i, e := range keys {
				bySet[e.Set] = append(bySet[e.Set], i)
			}
			var grow []error
			for set, at := range bySet {
				write := r.sets.AddEntries
				if removals {
					write = r.sets.DeleteEntries
				} else if err := r.ensureCapacity(set, len(at)); err != nil {
					grow = append(grow, err)
				}
				entries := make([]ipset.Entry, len(at))
				for j, i := range at {
					entries[j] = keys[i].Entry
				}
				for j, err := range write(set, entries) {
					answers[at[j]] = err
				}
			}
			return answers, errors.Join(grow...)
		}}
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
		w := r.byService[n]
		for _, k := range w.VirtualServers {
			p.vs = vs.add(p.vs, r.vs.dirty, k)
		}
		for _, a := range w.Addresses {
			p.addr = addr.add(p.addr, r.addr.dirty, a)
		}
		for _, e := range w.Entries {
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
