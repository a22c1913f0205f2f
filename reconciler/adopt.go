package reconciler

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/realset"
)

// adopt makes the belief agree with a kernel read, except for keys written
// since beginRead, where the belief is newer than the read, and marks dirty
// every key where the two differed, so the next apply repairs the drift. It
// returns the written keys and ends their recording.
//
// The caller holds r.mu. At 50k Services comparing a read with the belief
// takes seconds in a small VM, so adopt calls pause before each key, which
// releases r.mu now and then (see pacer), and releases it while it
// re-reads, letting a waiting sync run; keys that sync writes are then left
// alone like those written during the read.
func (r *Reconciler) adopt(v *kernelView, pause func()) (map[ipvs.Key]bool, error) {
	// Virtual servers where the read and the belief disagree are read
	// again, alone, before the belief takes them (see reread); so are
	// strays whose real servers the read left out. The read did not look
	// at virtual servers outside a share's plan, and those that are not
	// ours are none of the belief's business.
	unread := func(k ipvs.Key) bool {
		_, looked := v.only[k]
		return v.only != nil && !looked || !r.ours(k)
	}
	looked := len(v.only)
	if v.only == nil {
		looked = len(r.vs.have)
	}
	var disagree []ipvs.Key
	for _, k := range r.vs.drifted(v.vs, sameVS, unread, pause) {
		_, believed := r.vs.have[k]
		if read, ok := v.vs[k]; ok && !believed && read.reals != nil {
			r.vs.take(k, read, true) // a stray, or new since the last read
			r.borrowWanted(k)
			continue
		}
		disagree = append(disagree, k)
	}
	r.mu.Unlock()
	confirmed, err := r.reread(disagree)
	r.mu.Lock()
	drifted := 0
	for _, c := range confirmed {
		pause()
		if r.vs.written[c.key] {
			continue
		}
		h, believed := r.vs.have[c.key]
		if c.present != believed || c.present && !sameVS(c.key, c.held, h) {
			r.vs.take(c.key, c.held, c.present)
			r.borrowWanted(c.key)
			drifted++
		}
	}
	// A share in which a tenth of the virtual servers drifted (a flushed
	// table, a restarted ipvs module) says the others did too: the next
	// check reads them all. One server another program keeps changing
	// does not make every check whole.
	if v.share && drifted > 0 && drifted*10 >= looked {
		r.reading.wholeNext = true
	}

	for _, k := range r.addr.drifted(v.addr, sameMember, r.notOurAddress, pause) {
		_, present := v.addr[k]
		r.addr.take(k, struct{}{}, present)
	}
	unreadSet := func(e desired.SetEntry) bool { return v.unreadSets[e.Set] }
	for _, k := range r.entry.drifted(v.entry, sameMember, unreadSet, pause) {
		_, present := v.entry[k]
		r.entry.take(k, struct{}{}, present)
	}

	for k := range r.draining.reals {
		if _, ok := r.vs.have[k]; !ok {
			delete(r.draining.reals, k)
		}
	}
	r.reading.adopted = true
	return r.endRead(), err
}

// sameVS says whether a read of a virtual server matches the belief; a read
// that left its real servers out (real nil) matches on attributes alone.
func sameVS(_ ipvs.Key, read, have heldVS) bool {
	return read.vs == have.vs && (read.reals == nil || realset.SameWeights(read.reals, have.reals))
}

// sameMember compares two members both present: presence is all they have.
func sameMember[K comparable](K, struct{}, struct{}) bool { return true }

// pacer returns the pause a long walk over the belief calls before each
// key, holding r.mu: every adoptSlice calls it releases r.mu and takes it
// again. The belief maps may change while r.mu is released; Go defines a
// range over a map that changes meanwhile (entries added may or may not be
// visited), and a key written meanwhile is skipped by its written mark.
// held, if not nil, is told how long r.mu was held before each release:
// how long a sync may wait for the walk.
func (r *Reconciler) pacer(held func(time.Duration)) func() {
	n := 0
	var since time.Time
	if held != nil {
		since = time.Now()
	}
	return func() {
		if n++; n%r.reading.adoptSlice != 0 {
			return
		}
		if held != nil {
			held(time.Since(since))
		}
		r.mu.Unlock()
		runtime.Gosched() // a sync waiting for the lock takes it now
		r.mu.Lock()
		if held != nil {
			since = time.Now()
		}
	}
}

// ours says whether the reconciler manages virtual server k: one it wants,
// or one outside --ipvs-exclude-cidrs.
func (r *Reconciler) ours(k ipvs.Key) bool {
	if !r.excluded(k.Address) {
		return true
	}
	_, wanted := r.vs.want[k]
	return wanted
}

// notOurAddress says an address on kube-ipvs0 is someone else's: inside
// --ipvs-exclude-cidrs and wanted by no Service. Upstream unbinds those.
func (r *Reconciler) notOurAddress(a netip.Addr) bool {
	if !r.excluded(a) {
		return false
	}
	_, wanted := r.addr.want[a]
	return !wanted
}

// reading is one virtual server as reread found it.
type reading struct {
	key     ipvs.Key
	held    heldVS
	present bool
}

// reread reads the given virtual servers again, one request each, to
// confirm what a dump saw: a dump of a table that changes while it is read
// (the kernel resumes dumps by position) can skip entries. At 10k Services,
// with Services added and deleted meanwhile, dumps missed real servers, and
// the repair's add then failed with "file exists". Drift is rare, so this
// costs requests per disagreement, not per virtual server. It touches only
// the kernel, so it runs without the reconciler's lock; a virtual server it
// fails to read keeps its belief until the next drift check.
func (r *Reconciler) reread(keys []ipvs.Key) ([]reading, error) {
	var out []reading
	var errs []error
	for _, k := range keys {
		rd, err := r.readOne(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("confirm %v: %w", k, err))
			continue
		}
		out = append(out, rd)
	}
	return out, errors.Join(errs...)
}

// readOne reads one virtual server with its real servers: two requests.
func (r *Reconciler) readOne(k ipvs.Key) (reading, error) {
	vs, ok, err := r.getVirtualServer(k)
	if err != nil || !ok {
		return reading{key: k}, err
	}
	reals, err := r.dumpRealServers(k)
	if err != nil {
		return reading{}, err
	}
	return reading{key: k, held: heldVS{vs, realset.New(reals)}, present: true}, nil
}
