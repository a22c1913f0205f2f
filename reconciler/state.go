package reconciler

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/realset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/serviceview"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/view"
)

// State returns the view of the named Services, or of all if none is
// named. It holds the reconciler's lock while serviceview copies, which a
// sync waits for: O(Services) at most.
func (r *Reconciler) State(names ...types.NamespacedName) view.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return serviceview.State(serviceview.Services{
		Wanted: r.byService, WantOf: r.vs.want.Of, Programmed: r.programmed.At(), Belief: belief{r}, Failed: r.failedLocked(),
	}, names)
}

// belief lends serviceview what the reconciler believes the kernel holds;
// its methods expect r.mu held.
type belief struct{ r *Reconciler }

func (b belief) VirtualServer(k ipvs.Key) (ipvs.VirtualServer, *realset.Set, bool) {
	h, held := b.r.vs.have[k]
	return h.vs, h.reals, held
}

func (b belief) Address(a netip.Addr) bool {
	_, held := b.r.addr.have[a]
	return held
}

func (b belief) Entry(e desired.SetEntry) bool {
	_, held := b.r.entry.have[e]
	return held
}

// settleProgrammed stamps the Services whose objects are all clean.
func (r *Reconciler) settleProgrammed() {
	r.programmed.Settle(r.now(), func(name types.NamespacedName) bool { return r.clean(r.byService[name]) })
}

// clean says whether none of w's objects is dirty.
func (r *Reconciler) clean(w desired.Keys) bool {
	for _, k := range w.VirtualServers {
		if r.vs.dirty[k] {
			return false
		}
	}
	for _, a := range w.Addresses {
		if r.addr.dirty[a] {
			return false
		}
	}
	for _, e := range w.Entries {
		if r.entry.dirty[e] {
			return false
		}
	}
	return true
}

// VirtualServerOwners names the Service that wants each virtual server.
func (r *Reconciler) VirtualServerOwners() map[ipvs.Key]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[ipvs.Key]string, len(r.vs.want))
	for k := range r.vs.want {
		out[k] = r.vs.want.Owner(k).String()
	}
	return out
}
