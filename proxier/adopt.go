package proxier

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// adopt makes the belief agree with a kernel read, except for keys written
// since beginRead, where the belief is newer than the read, and marks dirty
// every key where the two differed, so the next apply repairs the drift. It
// returns the written keys and ends their recording.
//
// The caller holds r.mu. At 50k Services comparing a read with the belief
// takes seconds in a small VM, so adopt releases r.mu every adoptSlice keys
// and while it re-reads, letting a waiting sync run; keys that sync writes
// are then left alone like those written during the read.
func (r *reconciler) adopt(v *kernelView) (*writtenKeys, error) {
	w := r.written
	if w == nil {
		w = &writtenKeys{}
	}
	pause := r.pacer()

	// Virtual servers where the read and the belief disagree are read
	// again, alone, before the belief takes them (see reread); so are
	// strays whose real servers the read left out.
	var disagree []ipvs.Key
	for k, vs := range v.vs {
		pause()
		if w.vs[k] || !r.differs(k, vs, v.rs[k], true) {
			continue
		}
		if _, believed := r.haveVS[k]; believed || v.rs[k] == nil {
			disagree = append(disagree, k)
		} else {
			r.take(k, vs, v.rs[k], true) // a stray, or new since the last read
		}
	}
	for k := range r.haveVS {
		pause()
		if _, looked := v.only[k]; v.only != nil && !looked {
			continue // not looked at by this read
		}
		if _, read := v.vs[k]; !read && !w.vs[k] {
			disagree = append(disagree, k)
		}
	}
	r.mu.Unlock()
	confirmed, err := r.reread(disagree)
	r.mu.Lock()
	for _, c := range confirmed {
		pause()
		if !w.vs[c.key] {
			r.take(c.key, c.vs, c.rs, c.present)
		}
	}

	adoptMembers(v.addr, r.addresses(), w.addr, nil, pause)
	adoptMembers(v.entry, r.entries(), w.entry, func(e setEntry) bool { return v.unreadSets[e.set] }, pause)

	for k := range r.draining {
		if _, ok := r.haveVS[k]; !ok {
			delete(r.draining, k)
		}
	}
	r.written = nil
	r.adopted = true
	return w, err
}

// pacer returns a function to call before each key's comparison: every
// adoptSlice calls it releases r.mu and takes it again. The belief maps may
// change while l is released; Go defines a range over a map that changes
// meanwhile (entries added may or may not be visited), and a key written
// meanwhile is skipped by its written mark.
func (r *reconciler) pacer() func() {
	n := 0
	return func() {
		if n++; n%r.adoptSlice == 0 {
			r.mu.Unlock()
			runtime.Gosched() // a sync waiting for the lock takes it now
			r.mu.Lock()
		}
	}
}

// differs says whether the belief about virtual server k differs from a
// read of it; present says whether the read found it, and rs is nil if the
// read left its real servers out.
func (r *reconciler) differs(k ipvs.Key, vs ipvs.VirtualServer, rs *realSet, present bool) bool {
	present = present && r.ours(k)
	believed, ok := r.haveVS[k]
	if !ok || !present {
		return ok != present
	}
	return vs != believed || rs != nil && !sameWeights(rs, r.haveRS[k])
}

// take gives the belief a read of virtual server k, marking k dirty if they
// differed.
func (r *reconciler) take(k ipvs.Key, vs ipvs.VirtualServer, rs *realSet, present bool) {
	present = present && r.ours(k)
	if !r.differs(k, vs, rs, present) {
		return
	}
	if present {
		r.haveVS[k], r.haveRS[k] = vs, rs
	} else {
		delete(r.haveVS, k)
		delete(r.haveRS, k)
	}
	r.dirtyVS[k] = true
}

// ours says whether the reconciler manages virtual server k: one it wants,
// or one outside --ipvs-exclude-cidrs.
func (r *reconciler) ours(k ipvs.Key) bool {
	if !r.excluded(k.Address) {
		return true
	}
	_, wanted := r.wantVS.get(k)
	return wanted
}

// adoptMembers gives the belief about one kind of member (addresses, ipset
// entries) a read's answer for each member either holds, except members
// written since the read began and those unread (nil: none), marking dirty
// those where the two differed.
func adoptMembers[K comparable](read map[K]bool, m members[K], written map[K]bool, unread func(K) bool, pause func()) {
	adopt := func(k K) {
		if written[k] || read[k] == m.have[k] || unread != nil && unread(k) {
			return
		}
		m.believe(k, read[k])
		(*m.dirty)[k] = true
	}
	for k := range read {
		pause()
		adopt(k)
	}
	for k := range m.have {
		pause()
		adopt(k)
	}
}

// reading is one virtual server as reread found it.
type reading struct {
	key     ipvs.Key
	vs      ipvs.VirtualServer
	rs      *realSet
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
func (r *reconciler) reread(keys []ipvs.Key) ([]reading, error) {
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
func (r *reconciler) readOne(k ipvs.Key) (reading, error) {
	vs, ok, err := r.getVirtualServer(k)
	if err != nil || !ok {
		return reading{key: k}, err
	}
	reals, err := r.dumpRealServers(k)
	if err != nil {
		return reading{}, err
	}
	return reading{key: k, vs: vs, rs: newRealSet(reals), present: true}, nil
}
