package reconciler

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/view"
)

// State returns the view of the named Services, or of all if none is
// named. It holds the reconciler's lock while it copies, which a sync
// waits for: O(Services) at most.
func (r *Reconciler) State(names ...types.NamespacedName) view.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(names) == 0 {
		for n := range r.byService {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	out := view.State{Services: []view.Service{}, Failed: r.failedLocked()}
	for _, n := range names {
		if st, ok := r.byService[n]; ok {
			out.Services = append(out.Services, r.serviceState(n, st))
		}
	}
	return out
}

func (r *Reconciler) serviceState(name types.NamespacedName, st desired.State) view.Service {
	s := view.Service{Name: name.String(), Programmed: r.programmed.at[name]}
	fail := func(kind status.Kind, object string, f status.Failure, failed bool) {
		if failed {
			s.Failed = append(s.Failed, status.Object{Kind: kind, Object: object, Failure: f})
		}
	}
	for _, v := range st.VirtualServers {
		k := v.Virtual.Key
		h, held := r.vs.have[k]
		vs := view.VirtualServer{Key: k.String(), Scheduler: v.Virtual.Scheduler, Flags: v.Virtual.Flags, Timeout: v.Virtual.Timeout,
			Held: held && h.vs == v.Virtual}
		wanted := map[netip.AddrPort]bool{}
		for _, rs := range v.Reals {
			wanted[rs.ID()] = true
			cur, ok := ipvs.RealServer{}, false
			if held {
				cur, ok = h.reals.get(rs.ID())
			}
			vs.Reals = append(vs.Reals, view.Real{Address: rs.ID().String(), Weight: rs.Weight, Wanted: true, Held: ok && cur.Weight == rs.Weight})
		}
		if held {
			for _, cur := range h.reals.members() {
				if !wanted[cur.ID()] {
					vs.Reals = append(vs.Reals, view.Real{Address: cur.ID().String(), Weight: cur.Weight, Held: true})
				}
			}
		}
		s.VirtualServers = append(s.VirtualServers, vs)
		f, failed := r.vs.status.Failure(k)
		fail(status.KindVirtualServer, k.String(), f, failed)
		if t := r.rsStatus.of(k); t != nil {
			for id := range t.Keys() {
				f, _ := t.Failure(id)
				fail(status.KindRealServer, k.String()+" "+id.String(), f, true)
			}
		}
	}
	for _, a := range st.Addresses {
		_, held := r.addr.have[a]
		s.Addresses = append(s.Addresses, view.Member{Object: a.String(), Held: held})
		f, failed := r.addr.status.Failure(a)
		fail(status.KindAddress, a.String(), f, failed)
	}
	for _, e := range st.Entries {
		_, held := r.entry.have[e]
		s.Entries = append(s.Entries, view.Member{Object: fmt.Sprint(e), Held: held})
		f, failed := r.entry.status.Failure(e)
		fail(status.KindSetEntry, fmt.Sprint(e), f, failed)
	}
	return s
}

// programmedTimes records when each Service was last fully programmed.
type programmedTimes struct {
	at map[types.NamespacedName]time.Time
	// pending are the Services recorded since they were last as wanted.
	pending map[types.NamespacedName]bool
}

// changed records that a Service's wants changed: it is pending until a
// sync leaves none of its objects dirty.
func (p *programmedTimes) changed(name types.NamespacedName, gone bool) {
	if gone {
		delete(p.at, name)
		delete(p.pending, name)
		return
	}
	p.pending[name] = true
}

// settle stamps the pending Services whose objects are all clean: written,
// or as wanted already.
func (r *Reconciler) settleProgrammed() {
	now := r.now()
	for name := range r.programmed.pending {
		if r.clean(r.byService[name]) {
			r.programmed.at[name] = now
			delete(r.programmed.pending, name)
		}
	}
}

// clean says whether none of st's objects is dirty.
func (r *Reconciler) clean(st desired.State) bool {
	for _, v := range st.VirtualServers {
		if r.vs.dirty[v.Virtual.Key] {
			return false
		}
	}
	for _, a := range st.Addresses {
		if r.addr.dirty[a] {
			return false
		}
	}
	for _, e := range st.Entries {
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
	for k, o := range r.vs.want {
		out[k] = o.owner.String()
	}
	return out
}
