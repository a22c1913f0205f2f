package reconciler

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/realset"
)

// A failed write may have left the kernel as wanted: when its answer was
// lost (a batch's acknowledgements overran the receive buffer: ENOBUFS), or
// when an add met an existing object or a delete met none, most often
// because an earlier write whose answer was lost did the work. Reported as
// the kernel's refusal, that is a false Warning Event on the Service. So a
// write failed that way is read back, and counts as written if the kernel
// holds what it asked; only a confirmed difference is a refusal. Only such
// failures are read back: at most a request and a dump per virtual server,
// one address list per pass, one test per set entry.

// vsReadBack is one virtual server as read back after a batch of writes.
type vsReadBack struct {
	err     error
	vsRead  bool // vs and present hold the virtual server's read
	vs      ipvs.VirtualServer
	present bool
	real    *realset.Set // its real servers; nil when not read
}

// readBackVirtualServers reads back the virtual servers of the ops that
// failed in a way that may not be a refusal (ipvs.Unconfirmed); nil if
// none did. Apply holds writesFirst, so it asks r.ipvs directly.
func (r *Reconciler) readBackVirtualServers(ops []ipvs.Op, errs []error) map[ipvs.Key]*vsReadBack {
	var out map[ipvs.Key]*vsReadBack
	for i, err := range errs {
		op := ops[i]
		if err == nil || !ipvs.Unconfirmed(op, err) {
			continue
		}
		k := op.VS.Key
		if out == nil {
			out = map[ipvs.Key]*vsReadBack{}
		}
		rb := out[k]
		if rb == nil {
			rb = &vsReadBack{}
			out[k] = rb
		}
		isVS := op.Kind == ipvs.AddVS || op.Kind == ipvs.UpdateVS || op.Kind == ipvs.DeleteVS
		if isVS && !rb.vsRead {
			var err error
			rb.vs, rb.present, err = r.ipvs.GetVirtualServer(k)
			rb.vsRead = err == nil
			rb.err = errors.Join(rb.err, err)
		}
		// An add that found its virtual server found its real servers too,
		// which the belief, lacking it, knows nothing of.
		if (!isVS || op.Kind == ipvs.AddVS) && rb.real == nil {
			reals, err := r.ipvs.RealServers(k)
			if err == nil {
				rb.real = realset.New(reals)
			}
			rb.err = errors.Join(rb.err, err)
		}
	}
	return out
}

// holds says whether the read back shows the kernel as op asked.
func (rb *vsReadBack) holds(op ipvs.Op) bool {
	if rb == nil || rb.err != nil {
		return false
	}
	switch op.Kind {
	case ipvs.AddVS, ipvs.UpdateVS:
		return rb.present && rb.vs == op.VS
	case ipvs.DeleteVS:
		return !rb.present
	case ipvs.AddRS, ipvs.UpdateRS:
		rs, ok := rb.real.Get(op.RS.ID())
		return ok && rs.Weight == op.RS.Weight
	case ipvs.DeleteRS:
		_, ok := rb.real.Get(op.RS.ID())
		return !ok
	}
	return false
}

// takeReadBack gives the belief what was read back of k, after the batch's
// outcomes were recorded: the read is newer than all of them, and a retry
// then writes what differs (an update where an add met a different object,
// not the same add again).
func (r *Reconciler) takeReadBack(k ipvs.Key, rb *vsReadBack) {
	if rb.err != nil {
		return
	}
	r.vs.wrote(k)
	h, believed := r.vs.have[k]
	switch {
	case rb.vsRead && !rb.present:
		r.vs.forget(k)
		delete(r.draining.reals, k)
		return
	case rb.vsRead:
		h.vs = rb.vs
		if !believed {
			h.reals = realset.New(nil)
		}
	case !believed:
		return // real servers of a virtual server not believed to exist
	}
	if rb.real != nil {
		h.reals = rb.real
	}
	r.vs.believe(k, h)
}

// unknownOutcome says a member write's answer was lost.
func unknownOutcome(err error) bool { return errors.Is(err, nlbatch.ErrOutcomeUnknown) }

// boundOf reads back which of addrs are bound to kube-ipvs0: one list.
func (r *Reconciler) boundOf(addrs []netip.Addr) (map[netip.Addr]bool, error) {
	list, err := r.addrs.Addresses()
	if err != nil {
		return nil, fmt.Errorf("read back addresses: %w", err)
	}
	bound := make(map[netip.Addr]bool, len(list))
	for _, a := range list {
		bound[a] = true
	}
	out := make(map[netip.Addr]bool, len(addrs))
	for _, a := range addrs {
		out[a] = bound[a]
	}
	return out, nil
}

// entriesHeld reads back which of entries their sets hold: a test each.
func (r *Reconciler) entriesHeld(entries []desired.SetEntry) (map[desired.SetEntry]bool, error) {
	out := make(map[desired.SetEntry]bool, len(entries))
	for _, e := range entries {
		ok, err := r.sets.Has(e.Set, e.Entry)
		if err != nil {
			return out, fmt.Errorf("read back %s: %w", e.Entry, err)
		}
		out[e] = ok
	}
	return out, nil
}
