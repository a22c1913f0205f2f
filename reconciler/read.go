package reconciler

import (
	"hash/maphash"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/realset"
)

// kernelView is the kernel as one drift check read it.
type kernelView struct {
	// vs holds the virtual servers read, each with its real servers, or
	// with real nil for those whose real servers were not read (see dumpPlan).
	vs    map[ipvs.Key]heldVS
	addr  map[netip.Addr]struct{}
	entry map[desired.SetEntry]struct{}
	// took is how long each part of the read took, for logs: at scale the
	// kernel's side of these dumps is most of a drift check.
	took readTimes
	// realServersOf counts the virtual servers whose real servers were read.
	realServersOf int
	// only, when not nil, holds the keys this read looked at (the plan's
	// believed share), the virtual servers not having been listed (see
	// dumpPlan); vs holds those found.
	only map[ipvs.Key]shareVS
	// share says the read was one share of a table read in several (see
	// dumpPlan), not whole.
	share bool
	// unreadSets are the sets whose entries were not listed, their counts
	// being what the belief expected; entry has none of theirs.
	unreadSets map[string]bool
}

type readTimes struct{ virtualServers, realServers, addresses, sets time.Duration }

// beginRead starts recording written keys and plans whose real servers the
// read dumps; call it holding r.mu before readKernel starts.
func (r *Reconciler) beginRead() {
	r.vs.beginRead()
	r.addr.beginRead()
	r.entry.beginRead()
	r.reading.plan = dumpPlan{}
	n := len(r.vs.have)
	if !r.reading.adopted || r.reading.wholeNext || n <= r.reading.dumpsMax {
		r.reading.wholeNext = false
		return
	}
	r.reading.plan = dumpPlan{seed: r.reading.seed, shares: (n + r.reading.dumpsMax - 1) / r.reading.dumpsMax, always: map[ipvs.Key]bool{}}
	r.reading.plan.share = r.reading.rounds % r.reading.plan.shares
	r.reading.rounds++
	for k := range r.draining.reals {
		r.reading.plan.always[k] = true
	}
}

// planShare completes beginRead's plan, when the read does not list the
// virtual servers, with what the reconciler believes about its share. It
// hashes every believed key (~0.3 s at 50k in the test VM), so it holds
// r.mu a slice at a time, like adopt; keys written meanwhile are marked
// written, and adopt leaves them alone.
func (r *Reconciler) planShare() {
	if r.reading.plan.shares <= 1 || r.reading.plan.share == 0 {
		return
	}
	r.reading.plan.believed = map[ipvs.Key]shareVS{}
	pause := r.pacer(nil)
	for k, h := range r.vs.have {
		pause()
		if r.reading.plan.covers(k) {
			r.reading.plan.believed[k] = shareVS{vs: h.vs, reals: h.reals.Len() > 0}
		}
	}
}

// realServerDumpsMax is the most virtual servers whose real servers one drift
// check dumps. The kernel answers one dump per virtual server (~0.2 ms of
// CPU each in the test VM), and a node pays for its drift checks every sync
// period while nothing changes: above this, each check dumps a share, so
// that a check's cost stays the same at any scale, and every virtual
// server's real servers are read within ceil(n/realServerDumpsMax) periods
// (4 at 10k). A share that finds drift makes the next check whole.
const realServerDumpsMax = 2500

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
	// about the virtual servers the share covers as the read began. The
	// read then compares each set's count in the kernel with the belief's
	// holding r.mu, so that a sync's writes meanwhile do not make them differ.
	believed map[ipvs.Key]shareVS
}

// shareVS is what the belief held of a virtual server in a share's plan.
type shareVS struct {
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

// readKernel reads the virtual servers with their real servers, the
// dummy link's addresses and our ipsets' entries. Besides the kernel it
// reads only handles, immutable fields, the plan beginRead and planShare
// made and, holding r.mu, the sets' believed counts, so it runs without
// r.mu while apply writes.
func (r *Reconciler) readKernel() (*kernelView, error) {
	v := &kernelView{vs: map[ipvs.Key]heldVS{}, entry: map[desired.SetEntry]struct{}{}, share: r.reading.plan.shares > 1}
	start := time.Now()
	lap := func(d *time.Duration) { now := time.Now(); *d, start = now.Sub(start), now }
	if r.reading.plan.believed != nil {
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
		reals, ok := table[vs.Key]
		if !ok {
			if table == nil && !r.reading.plan.covers(vs.Key) {
				v.vs[vs.Key] = heldVS{vs: vs}
				continue
			}
			// None if deleted since the list was read; the next check sees it gone.
			if reals, err = r.dumpRealServers(vs.Key); err != nil {
				return nil, err
			}
		}
		v.vs[vs.Key] = heldVS{vs, realset.New(reals)}
		v.realServersOf++
	}
	lap(&v.took.realServers)
	return r.readMembers(v, lap)
}

// dumpRealServers and getVirtualServer are a drift check's
// per-virtual-server requests, each made after any write that is waiting
// (see writesFirst).
func (r *Reconciler) dumpRealServers(k ipvs.Key) ([]ipvs.RealServer, error) {
	r.writesFirst.RLock()
	defer r.writesFirst.RUnlock()
	return r.ipvs.RealServers(k)
}

func (r *Reconciler) getVirtualServer(k ipvs.Key) (ipvs.VirtualServer, bool, error) {
	r.writesFirst.RLock()
	defer r.writesFirst.RUnlock()
	return r.ipvs.GetVirtualServer(k)
}

// readShare reads the virtual servers of the plan's share without listing
// them all: a real-server dump each, which is empty for a missing one, and
// a request for the virtual server itself where an empty answer is what
// the belief expects, to tell the two apart.
func (r *Reconciler) readShare(v *kernelView) error {
	v.only = r.reading.plan.believed
	for k, b := range r.reading.plan.believed {
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
		v.vs[k] = heldVS{vs, realset.New(reals)}
		v.realServersOf++
	}
	return nil
}

// readMembers reads the dummy link's addresses and our ipsets' entries into
// v, and returns v, or nil if a read failed.
func (r *Reconciler) readMembers(v *kernelView, lap func(*time.Duration)) (*kernelView, error) {
	addrs, err := r.addrs.Addresses()
	if err != nil {
		return nil, err
	}
	lap(&v.took.addresses)
	v.addr = make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		if !a.IsLinkLocalUnicast() { // the kernel's own, on a link that was up
			v.addr[a] = struct{}{}
		}
	}
	r.mu.Lock()
	missing := r.missingSets
	r.mu.Unlock()
	for _, name := range r.setNames {
		if missing[name] {
			continue // its entries read as absent until it is made
		}
		if r.reading.plan.believed != nil {
			r.mu.Lock()
			n, err := r.sets.Count(name)
			believed := r.setUse.entries[name]
			r.mu.Unlock()
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
			v.entry[desired.SetEntry{Set: name, Entry: e}] = struct{}{}
		}
	}
	lap(&v.took.sets)
	return v, nil
}

// readServices reads what the named Services want from the kernel into the
// reconciler's belief: their virtual servers with their real servers, their
// addresses and their ipset entries. Before the first drift check has read
// the whole kernel, it is what lets a few Services be written safely: adding
// a virtual server that exists fails, stale real servers must be seen to be
// removed, and objects in place must not be written again.
func (r *Reconciler) readServices(names []types.NamespacedName) error {
	var bound map[netip.Addr]bool
	for _, n := range names {
		w := r.byService[n]
		for _, k := range w.VirtualServers {
			if err := r.readVirtualServer(k); err != nil {
				return err
			}
		}
		if len(w.Addresses) > 0 && bound == nil {
			addrs, err := r.addrs.Addresses()
			if err != nil {
				return err
			}
			bound = make(map[netip.Addr]bool, len(addrs))
			for _, a := range addrs {
				bound[a] = true
			}
		}
		for _, a := range w.Addresses {
			believeIf(&r.addr, a, bound[a])
		}
		for _, e := range w.Entries {
			if r.missingSets[e.Set] {
				r.entry.forget(e)
				continue
			}
			ok, err := r.sets.Has(e.Set, e.Entry)
			if err != nil {
				return err
			}
			believeIf(&r.entry, e, ok)
		}
	}
	return nil
}

func (r *Reconciler) readVirtualServer(k ipvs.Key) error {
	rd, err := r.readOne(k)
	if err != nil {
		return err
	}
	if !rd.present {
		r.vs.forget(k)
		return nil
	}
	r.vs.believe(k, rd.held)
	return nil
}

// believeIf records whether the kernel holds member k.
func believeIf[K comparable](t *memberTable[K], k K, present bool) {
	if present {
		t.believe(k, struct{}{})
	} else {
		t.forget(k)
	}
}
