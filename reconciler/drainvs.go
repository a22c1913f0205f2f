package reconciler

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/realset"
)

// A TCP virtual server that no Service wants any more (its Service was
// deleted, or lost that port or address) drains when its real servers
// carry connections, as a removed real server does: the idle real servers
// go at once, the busy ones to weight 0, and the virtual server stays,
// with its address on kube-ipvs0 and its KUBE-IPVS-IPS entry, until a
// drift check sees their connections end. Upstream deletes it at once,
// cutting every long-lived connection through it.
//
// Two kinds still go at once, as upstream: a virtual server without
// connections, and one on an address of the node's own (a node port, an
// external IP the node has), since that address may have left the node.
// The draining virtual server's address and entry are held under an owner
// of their own (drainOwner), so the address and entry tables keep them as
// they keep any wanted object.

// drainOwner is the owner that holds a draining virtual server's address.
func drainOwner(k ipvs.Key) types.NamespacedName {
	return types.NamespacedName{Namespace: "(draining)", Name: k.String()}
}

func vipEntry(k ipvs.Key) desired.SetEntry {
	return desired.SetEntry{Set: desired.SetIPVSIPs, Entry: ipset.Entry{IP: k.Address}}
}

// startDrain makes virtual server k drain if no Service wants it any more
// and its real servers carry connections: one dump of k's real servers,
// which the apply that follows uses too. setService calls it for each
// virtual server a Service lets go.
func (r *Reconciler) startDrain(k ipvs.Key) {
	if _, wanted := r.vs.want.Get(k); wanted || k.Protocol != ipvs.TCP || r.draining.servers[k] {
		return
	}
	if h, ok := r.vs.have[k]; !ok || h.reals.Len() == 0 {
		return
	}
	if _, bound := r.addr.have[k.Address]; !bound {
		return
	}
	// Unread, it drains: the drift check decides.
	if read := r.readForDrain(k); read != nil {
		if !slices.ContainsFunc(read.Members(), ipvs.RealServer.Connected) {
			return
		}
		if r.draining.read == nil {
			r.draining.read = map[ipvs.Key]*realset.Set{}
		}
		r.draining.read[k] = read
	}
	r.draining.servers[k] = true
	owner := drainOwner(k)
	r.addr.update(k.Address, owner, struct{}{})
	r.wantEntry(vipEntry(k), owner)
}

// endDrain lets k's address go and marks k dirty: wanted again, it is
// programmed as such; still unwanted, the next apply deletes it.
func (r *Reconciler) endDrain(k ipvs.Key) {
	if !r.draining.servers[k] {
		return
	}
	delete(r.draining.servers, k)
	owner := drainOwner(k)
	r.addr.delete(k.Address, owner)
	r.unwantEntry(vipEntry(k), owner)
	r.vs.mark(k)
}

// drainsWhole says whether apply keeps unwanted virtual server k, held as
// have, for its real servers to drain.
func (r *Reconciler) drainsWhole(k ipvs.Key, have heldVS) bool {
	return r.draining.servers[k] && have.reals.Len() > 0
}

// wantEntry and unwantEntry record that owner wants set entry e, or no
// longer does, keeping each set's count of wanted entries.
func (r *Reconciler) wantEntry(e desired.SetEntry, owner types.NamespacedName) {
	if _, already := r.entry.want.Get(e); !already {
		r.setUse.wanted[e.Set]++
	}
	r.entry.update(e, owner, struct{}{})
}

func (r *Reconciler) unwantEntry(e desired.SetEntry, owner types.NamespacedName) {
	_, had := r.entry.want.Get(e)
	r.entry.delete(e, owner)
	if _, still := r.entry.want.Get(e); had && !still {
		r.setUse.wanted[e.Set]--
	}
}

// forgetDrainRead drops the connection counts record read for this sync's
// applies: a virtual server they did not plan (its retry not due, or not
// among the first Services) reads afresh when it is planned. The next sync
// has a fresh budget of reads.
func (r *Reconciler) forgetDrainRead() { r.draining.read, r.draining.reads = nil, 0 }
