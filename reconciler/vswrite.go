package reconciler

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/realset"
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
	for i, op := range ops {
		if i+1 == len(ops) || ops[i+1].VS.Key != op.VS.Key {
			r.borrowWanted(op.VS.Key)
		}
	}
	return n, errs
}

// borrowWanted: where the kernel holds k's wanted real servers, the belief borrows them.
func (r *Reconciler) borrowWanted(k ipvs.Key) {
	if h, held := r.vs.have[k]; held {
		want, _ := r.vs.want.Get(k)
		h.reals.Borrow(want.Reals)
	}
}

// change is what one virtual server needs, as prepare and plan both see
// it: the wanted state (with no real server, for an unwanted one that
// drains whole), what is believed held, and the virtual server's own write
// (vsOp.Kind 0 for none).
type change struct {
	want                      desired.VirtualServer
	have                      heldVS
	wanted, exists, drainsAll bool
	vsOp                      ipvs.Op
}

func (r *Reconciler) changeOf(k ipvs.Key) change {
	c := change{}
	c.want, c.wanted = r.vs.want.Get(k)
	c.have, c.exists = r.vs.have[k]
	c.drainsAll = !c.wanted && c.exists && r.drainsWhole(k, c.have)
	if c.drainsAll {
		c.want = desired.VirtualServer{Virtual: c.have.vs} // no real server wanted
	}
	c.vsOp = ipvs.Op{VS: c.want.Virtual}
	switch {
	case !c.wanted && !c.exists, c.drainsAll:
	case !c.wanted:
		c.vsOp = ipvs.Op{Kind: ipvs.DeleteVS, VS: c.have.vs}
	case !c.exists:
		c.vsOp.Kind = ipvs.AddVS
	case c.have.vs != c.want.Virtual:
		c.vsOp.Kind = ipvs.UpdateVS
	}
	return c
}

// realsWritten says whether plan writes c's real servers: not when the
// virtual server goes (they go with it) or its own write waits for a retry.
func (c change) realsWritten(r *Reconciler, k ipvs.Key, now time.Time) bool {
	if !c.wanted && !c.drainsAll {
		return false
	}
	return c.vsOp.Kind == 0 || !r.vs.status.Waiting(k, now)
}

// prepare is what an apply does for the virtual servers of keys before
// plan: it decides which removed TCP real servers drain (weight 0 until
// their connections end) and which go at once, reading a virtual server's
// connection counts where a drain would start (see drain.go), ends the
// drain of real servers wanted again, and notes the UDP flows that removed
// real servers leave behind. plan then only reads.
func (r *Reconciler) prepare(keys keys[ipvs.Key], now time.Time) {
	for k := range keys.each() {
		c := r.changeOf(k)
		if c.have.reals.Len() == 0 && r.draining.reals[k] == nil || !c.realsWritten(r, k, now) {
			continue // nothing removed, nothing draining: a new virtual server
		}
		wantedRS := make(map[netip.AddrPort]bool, len(c.want.Reals))
		for _, rs := range c.want.Reals {
			id := rs.ID()
			wantedRS[id] = true
			if d := r.draining.reals[k]; d != nil {
				delete(d, id)
				if len(d) == 0 {
					delete(r.draining.reals, k)
				}
			}
		}
		var conns *realset.Set
		connsRead, staleUDP := false, false
		for _, cur := range c.have.reals.Members() {
			id := cur.ID()
			switch {
			case wantedRS[id]:
			case k.Protocol != ipvs.TCP:
				// Removing a UDP real server while others serve leaves
				// conntrack entries answered by it (see package conntrack).
				staleUDP = staleUDP || (k.Protocol == ipvs.UDP && len(c.want.Reals) > 0)
			case !r.draining.reals[k][id]:
				// A drain would start: only what carries connections
				// drains; unread, it drains and the drift check decides.
				if !connsRead {
					conns, connsRead = r.connectionsOf(k), true
				}
				if rs, ok := conns.Get(id); conns != nil && (!ok || !rs.Connected()) {
					continue
				}
				if r.draining.reals[k] == nil {
					r.draining.reals[k] = map[netip.AddrPort]bool{}
				}
				r.draining.reals[k][id] = true
			}
		}
		if staleUDP {
			r.flows.pending = append(r.flows.pending, conntrack.Stale{VIP: netip.AddrPortFrom(k.Address, k.Port), Keep: slices.Collect(maps.Keys(wantedRS))})
		}
	}
}

// plan adds the writes that make one virtual server and its real servers
// as wanted, as prepare decided: an unwanted TCP real server that drains
// goes to weight 0, any other unwanted one is deleted.
func (vk virtualServers) plan(k ipvs.Key, now time.Time, p *plans[ipvs.Op]) (waits bool) {
	r := vk.r
	add := func(op ipvs.Op) {
		if op.Kind == ipvs.DeleteRS || op.Kind == ipvs.DeleteVS {
			p.removals = append(p.removals, op)
		} else {
			p.puts = append(p.puts, op)
		}
	}
	c := r.changeOf(k)
	if !c.wanted && !c.exists {
		r.vs.status.OK(k)
		r.rsStatus.Forget(k)
		return false
	}
	if c.vsOp.Kind == 0 {
		r.vs.status.OK(k)
	} else {
		if r.vs.status.Waiting(k, now) {
			return true
		}
		add(c.vsOp)
	}
	if !c.wanted && !c.drainsAll {
		return false
	}
	rsOp := func(kind ipvs.OpKind, rs ipvs.RealServer) {
		if r.rsStatus.Waiting(k, rs.ID(), now) {
			waits = true
			return
		}
		add(ipvs.Op{Kind: kind, VS: c.want.Virtual, RS: rs})
	}
	haveRS := c.have.reals
	wantedRS := make(map[netip.AddrPort]bool, len(c.want.Reals))
	for _, rs := range c.want.Reals {
		id := rs.ID()
		wantedRS[id] = true
		cur, ok := haveRS.Get(id)
		switch {
		case !ok:
			rsOp(ipvs.AddRS, rs)
		case cur.Weight != rs.Weight:
			rsOp(ipvs.UpdateRS, rs)
		default:
			r.rsStatus.OK(k, id)
		}
	}
	for _, cur := range haveRS.Members() {
		switch id := cur.ID(); {
		case wantedRS[id]:
		case k.Protocol == ipvs.TCP && r.draining.reals[k][id]:
			if cur.Weight != 0 {
				cur.Weight = 0
				rsOp(ipvs.UpdateRS, cur)
			}
		default:
			rsOp(ipvs.DeleteRS, cur)
		}
	}
	// A real server that failed and is now neither wanted nor present
	// needs nothing more.
	if t := r.rsStatus.Of(k); t != nil {
		for id := range t.Keys() {
			if _, present := haveRS.Get(id); !wantedRS[id] && !present {
				r.rsStatus.OK(k, id)
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
		r.rsStatus.Forget(op.VS.Key)
	default:
		r.rsStatus.OK(op.VS.Key, op.RS.ID())
	}
}

func (r *Reconciler) opFailed(op ipvs.Op, err error, now time.Time) {
	owner := r.vs.want.Owner(op.VS.Key)
	switch op.Kind {
	case ipvs.AddVS, ipvs.UpdateVS, ipvs.DeleteVS:
		r.vs.status.Fail(op.VS.Key, err, now, owner)
	default:
		r.rsStatus.Fail(op.VS.Key, op.RS.ID(), err, now, owner)
	}
}

// believe records a write the kernel accepted.
func (r *Reconciler) believe(op ipvs.Op) {
	k := op.VS.Key
	switch op.Kind {
	case ipvs.AddVS:
		// Sized for the real servers to come: grown by append, a set of
		// ten would hold room for sixteen, at every virtual server.
		want, _ := r.vs.want.Get(k)
		r.vs.believe(k, heldVS{op.VS, realset.New(make([]ipvs.RealServer, 0, len(want.Reals)))})
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
		cur, ok := h.reals.Get(op.RS.ID())
		if !ok {
			cur = op.RS
		}
		cur.Weight = op.RS.Weight
		h.reals.Put(cur)
	case ipvs.DeleteRS:
		r.vs.have[k].reals.Remove(op.RS.ID())
	}
}
