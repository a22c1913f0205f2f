package reconciler

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// The state view is what an operator asks of a running proxier (its
// /debug/state and the status command): per Service, what it wants, what
// the reconciler believes the kernel holds of it, and its failed objects.

// ServiceState is one Service's objects, wanted and believed held.
type ServiceState struct {
	Name           string               `json:"name"`
	VirtualServers []VirtualServerState `json:"virtualServers,omitempty"`
	Addresses      []MemberState        `json:"addresses,omitempty"`
	Entries        []MemberState        `json:"entries,omitempty"`
	Failed         []status.Object      `json:"failed,omitempty"`
	// Programmed is when every object of the Service was last as wanted in
	// the kernel; zero while it waits for its first write.
	Programmed time.Time `json:"programmed,omitzero"`
}

// VirtualServerState is a wanted virtual server: held says the kernel is
// believed to hold it with these attributes.
type VirtualServerState struct {
	Key       string      `json:"key"`
	Scheduler string      `json:"scheduler"`
	Flags     uint32      `json:"flags,omitempty"`
	Timeout   uint32      `json:"timeout,omitempty"`
	Held      bool        `json:"held"`
	Reals     []RealState `json:"reals,omitempty"`
}

// RealState is a real server wanted, or held and no longer wanted (one
// that drains). Weight is the wanted weight, or the held one if unwanted.
type RealState struct {
	Address string `json:"address"`
	Weight  int    `json:"weight"`
	Wanted  bool   `json:"wanted"`
	Held    bool   `json:"held"`
}

// MemberState is an address or a set entry and whether it is held.
type MemberState struct {
	Object string `json:"object"`
	Held   bool   `json:"held"`
}

// State is the reconciler's view, for the Services named, or all if none
// is. Failed lists every failed object, those no Service wants included.
type State struct {
	Services []ServiceState  `json:"services"`
	Failed   []status.Object `json:"failed"`
}

// State returns the view. It holds the reconciler's lock while it copies,
// which a sync waits for: O(Services) at most.
func (r *Reconciler) State(names ...types.NamespacedName) State {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(names) == 0 {
		for n := range r.byService {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	out := State{Services: []ServiceState{}, Failed: r.failedLocked()}
	for _, n := range names {
		if st, ok := r.byService[n]; ok {
			out.Services = append(out.Services, r.serviceState(n, st))
		}
	}
	return out
}

func (r *Reconciler) serviceState(name types.NamespacedName, st desired.State) ServiceState {
	s := ServiceState{Name: name.String(), Programmed: r.programmed.at[name]}
	fail := func(kind status.Kind, object string, f status.Failure, failed bool) {
		if failed {
			s.Failed = append(s.Failed, status.Object{Kind: kind, Object: object, Failure: f})
		}
	}
	for _, v := range st.VirtualServers {
		k := v.Virtual.Key
		h, held := r.vs.have[k]
		vs := VirtualServerState{Key: k.String(), Scheduler: v.Virtual.Scheduler, Flags: v.Virtual.Flags, Timeout: v.Virtual.Timeout,
			Held: held && h.vs == v.Virtual}
		wanted := map[netip.AddrPort]bool{}
		for _, rs := range v.Reals {
			wanted[rs.ID()] = true
			cur, ok := ipvs.RealServer{}, false
			if held {
				cur, ok = h.reals.get(rs.ID())
			}
			vs.Reals = append(vs.Reals, RealState{Address: rs.ID().String(), Weight: rs.Weight, Wanted: true, Held: ok && cur.Weight == rs.Weight})
		}
		if held {
			for _, cur := range h.reals.members() {
				if !wanted[cur.ID()] {
					vs.Reals = append(vs.Reals, RealState{Address: cur.ID().String(), Weight: cur.Weight, Held: true})
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
		s.Addresses = append(s.Addresses, MemberState{Object: a.String(), Held: held})
		f, failed := r.addr.status.Failure(a)
		fail(status.KindAddress, a.String(), f, failed)
	}
	for _, e := range st.Entries {
		_, held := r.entry.have[e]
		s.Entries = append(s.Entries, MemberState{Object: fmt.Sprint(e), Held: held})
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
