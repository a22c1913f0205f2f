package reconciler

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// virtualServers is the kind of the virtual-server table: its writes are
// IPVS operations on a virtual server or on one of its real servers, which
// are members of its row.
type virtualServers struct{ r *Reconciler }

func (vk virtualServers) write(ops []ipvs.Op, _ bool) ([]error, error) {
	return vk.r.ipvs.Write(ops), nil
}

// record takes the answers of a batch. Ops that failed in a way that may
// not be a refusal are read back (see readback.go) and count as written if
// the kernel holds what they asked. A virtual server whose add failed takes
// its real servers' adds down with it: those are not failures of their own.
func (vk virtualServers) record(ops []ipvs.Op, answers []error, _ bool, now time.Time, pending map[ipvs.Key]bool) (int, []error) {
	r := vk.r
	var addFailed map[ipvs.Key]bool
	var errs []error
	n := 0
	back := r.readBackVirtualServers(ops, answers)
	for i, err := range answers {
		op := ops[i]
		k := op.VS.Key
		if err != nil && back[k].holds(op) {
			err = nil
		}
		if err == nil {
			n++
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
	return n, errs
}

// plan adds the writes that make one virtual server and its real servers
// as wanted. An unwanted TCP real server that carries connections is
// drained (weight 0 until they end); one that carries none is deleted (see
// drain.go).
func (vk virtualServers) plan(k ipvs.Key, now time.Time, p *plans[ipvs.Op]) (waits bool) {
	r := vk.r
	add := func(op ipvs.Op) {
		if op.Kind == ipvs.DeleteRS || op.Kind == ipvs.DeleteVS {
			p.removals = append(p.removals, op)
		} else {
			p.puts = append(p.puts, op)
		}
	}
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
		return false
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
			return true
		}
		add(vsOp)
	}
	if !wanted && !drainsWhole {
		return false
	}
	rsOp := func(kind ipvs.OpKind, rs ipvs.RealServer) {
		if r.rsStatus.waiting(k, rs.ID(), now) {
			waits = true
			return
		}
		add(ipvs.Op{Kind: kind, VS: want.Virtual, RS: rs})
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
		for id := range t.Keys() {
			if _, present := haveRS.get(id); !wantedRS[id] && !present {
				r.rsStatus.ok(k, id)
			}
		}
	}
	return waits
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

// believe records a write the kernel accepted.
func (r *Reconciler) believe(op ipvs.Op) {
	k := op.VS.Key
	switch op.Kind {
	case ipvs.AddVS:
		// Sized for the real servers to come: grown by append, a set of
		// ten would hold room for sixteen, at every virtual server.
		want, _ := r.vs.want.get(k)
		r.vs.believe(k, heldVS{op.VS, newRealSet(make([]ipvs.RealServer, 0, len(want.Reals)))})
	case ipvs.UpdateVS:
		h := r.vs.have[k]
		h.vs = op.VS
		r.vs.believe(k, h)
	case ipvs.DeleteVS:
		r.vs.forget(k)
		delete(r.draining.reals, k)
	case ipvs.AddRS, ipvs.UpdateRS:
		h, ok := r.vs.have[k]
		if !ok {
			return // only written with its virtual server, believed first
		}
		cur, ok := h.reals.get(op.RS.ID())
		if !ok {
			cur = op.RS
		}
		cur.Weight = op.RS.Weight
		h.reals.put(cur)
	case ipvs.DeleteRS:
		r.vs.have[k].reals.remove(op.RS.ID())
	}
}
