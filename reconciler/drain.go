package reconciler

import (
	"fmt"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/realset"
)

// endDrained ends the drain of the unwanted virtual servers whose real
// servers are all gone, so that the next apply deletes them.
func (r *Reconciler) endDrained() {
	for k := range r.draining.servers {
		if h, ok := r.vs.have[k]; !ok || h.reals.Len() == 0 {
			r.endDrain(k)
		}
	}
}

// Graceful termination, as upstream: a removed TCP real server that carries
// connections (active or inactive: TIME_WAIT holds one for two minutes)
// stays at weight 0 until they end; one that carries none is deleted at
// once, and so are UDP and SCTP ones. Whether it carries any is read when
// its drain would start: one dump of that virtual server's real servers,
// however many of them go, and only when a TCP real server goes. So
// connectionsOf reads virtual server k's real servers with their
// connection counts for apply, which holds writesFirst and so asks the
// kernel directly; what startDrain read in this sync serves instead. Nil
// when the read fails: its real servers then drain, and the drift check
// decides.
func (r *Reconciler) connectionsOf(k ipvs.Key) *realset.Set {
	if read, ok := r.draining.read[k]; ok {
		delete(r.draining.read, k)
		return read
	}
	return r.readForDrain(k)
}

// drainReadsMax bounds the real-server dumps one sync makes to decide what
// drains: deleting a Service of 90,300 virtual servers spent 64 of its
// sync's 92 s on them in the test VM, while other Services' changes waited.
// Past it, a virtual server's removed real servers drain, and the drift
// check deletes them once it sees no connection.
const drainReadsMax = 1024

// readForDrain reads k's real servers with their connection counts, nil
// when the sync's budget is spent or the read fails. Its callers hold r.mu
// with no apply writing meanwhile, or are the apply, which holds
// writesFirst: either way the kernel is asked directly.
func (r *Reconciler) readForDrain(k ipvs.Key) *realset.Set {
	if r.draining.reads >= drainReadsMax {
		return nil
	}
	r.draining.reads++
	reals, err := r.ipvs.RealServers(k)
	if err != nil {
		return nil
	}
	return realset.New(reals)
}

// drain deletes weight-0 real servers whose connections had ended when the
// kernel was read, from the read's counters: no request per virtual server on
// the sync goroutine. Virtual servers written during the read wait for the
// next drift check, as their counters may predate the write. The deletes
// are a kind of their own (drainedReals), written by writeKind as every
// other write is.
func (r *Reconciler) drain(v *kernelView, written map[ipvs.Key]bool) []error {
	defer r.endDrained()
	r.forgetVanished(v, written)
	draining := make(map[ipvs.Key]bool, len(r.draining.reals))
	for k := range r.draining.reals {
		draining[k] = true
	}
	l := writeKind(drainedReals{r: r, seen: v, written: written}, allKeys(&draining), r.now())
	r.done.Ops += l.ops
	return l.errs
}

// forgetVanished forgets the draining real servers the read no longer saw:
// their connections ended and the kernel let them go, or someone deleted
// them.
func (r *Reconciler) forgetVanished(v *kernelView, written map[ipvs.Key]bool) {
	for k, ids := range r.draining.reals {
		seen := v.vs[k].reals
		if written[k] || seen == nil {
			continue
		}
		for id := range ids {
			if _, ok := seen.Get(id); !ok {
				delete(ids, id)
				r.vs.have[k].reals.Remove(id)
			}
		}
		if len(ids) == 0 {
			delete(r.draining.reals, k)
		}
	}
}

// drainedReals is the kind of the drain's writes: its keys are virtual
// servers with draining real servers, its writes the deletes of those the
// read saw with no connection left.
type drainedReals struct {
	r       *Reconciler
	seen    *kernelView
	written map[ipvs.Key]bool
}

func (d drainedReals) plan(k ipvs.Key, _ time.Time, p *plans[ipvs.Op]) bool {
	seen := d.seen.vs[k].reals
	if d.written[k] || seen == nil {
		return false
	}
	for id := range d.r.draining.reals[k] {
		if rs, ok := seen.Get(id); ok && !rs.Connected() {
			p.removals = append(p.removals, ipvs.Op{Kind: ipvs.DeleteRS, VS: ipvs.VirtualServer{Key: k}, RS: rs})
		}
	}
	return false
}

func (d drainedReals) write(ops []ipvs.Op, _ bool) ([]error, error) { return d.r.ipvs.Write(ops), nil }

// record believes the deletes the kernel took; a refused one stays
// draining, its failure in the real server's status, and the next drift
// check tries it again.
func (d drainedReals) record(ops []ipvs.Op, answers []error, _ bool, now time.Time, _ map[ipvs.Key]bool) (int, []error) {
	r := d.r
	var errs []error
	n := 0
	for i, err := range answers {
		k, id := ops[i].VS.Key, ops[i].RS.ID()
		r.vs.wrote(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("drain: %w", err))
			r.rsStatus.Fail(k, id, err, now, r.vs.want.Owner(k))
			continue
		}
		r.rsStatus.OK(k, id)
		n++
		r.vs.have[k].reals.Remove(id)
		if ids := r.draining.reals[k]; ids != nil {
			delete(ids, id)
			if len(ids) == 0 {
				delete(r.draining.reals, k)
			}
		}
	}
	return n, errs
}
