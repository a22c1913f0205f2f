package proxier

import (
	"fmt"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// endDrained ends the drain of the unwanted virtual servers whose real
// servers are all gone, so that the next apply deletes them.
func (r *reconciler) endDrained() {
	for k := range r.drainingVS {
		if h, ok := r.vs.have[k]; !ok || h.real.len() == 0 {
			r.endDrain(k)
		}
	}
}

// drain deletes weight-0 real servers whose connections had ended when the
// kernel was read, from the read's counters: no request per virtual server on
// the sync goroutine. Virtual servers written during the read wait for the
// next drift check, as their counters may predate the write.
func (r *reconciler) drain(v *kernelView, written map[ipvs.Key]bool) []error {
	var ops []ipvs.Op
	for k, ids := range r.draining {
		seen := v.vs[k].real
		if written[k] || seen == nil {
			continue
		}
		for id := range ids {
			rs, ok := seen.get(id)
			if !ok {
				delete(ids, id)
				r.vs.have[k].real.remove(id)
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
	defer r.endDrained()
	var errs []error
	for i, err := range r.ipvs.Write(ops) {
		k, id := ops[i].VS.Key, ops[i].RS.ID()
		r.vs.wrote(k)
		if err != nil {
			errs = append(errs, fmt.Errorf("drain: %w", err))
			r.rsStatus.fail(k, id, err, r.now(), r.vs.want.owner(k))
			continue
		}
		r.rsStatus.ok(k, id)
		r.ops++
		r.vs.have[k].real.remove(id)
		if ids := r.draining[k]; ids != nil {
			delete(ids, id)
			if len(ids) == 0 {
				delete(r.draining, k)
			}
		}
	}
	return errs
}
