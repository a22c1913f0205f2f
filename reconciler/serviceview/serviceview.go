// Package serviceview builds the operator's view (package view) of the
// Services a reconciler programs: per Service, what it wants beside what
// the kernel is believed to hold of it, and its failed objects. It only
// reads what the reconciler lends it while holding its lock, and keeps
// none of it; it writes nothing and talks to no kernel.
package serviceview

import (
	"cmp"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/realset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/view"
)

// Belief is what the reconciler believes the kernel holds of each object.
type Belief interface {
	// VirtualServer is virtual server k as believed held, with its real
	// servers; held is false if it is not believed held.
	VirtualServer(k objects.Key) (vs objects.VirtualServer, reals *realset.Set, held bool)
	Address(a netip.Addr) (held bool)
	Entry(e desired.SetEntry) (held bool)
}

// Services is what the view is built from.
type Services struct {
	// Wanted is what each Service wants, by key; a Service that wants
	// nothing is not in it. WantOf is what a Service wants of a virtual
	// server.
	Wanted map[types.NamespacedName]desired.Keys
	WantOf func(k objects.Key, owner types.NamespacedName) (desired.VirtualServer, bool)
	// Programmed is when each Service was last fully programmed.
	Programmed map[types.NamespacedName]time.Time
	Belief     Belief
	// Failed is every failed object, sorted, those no Service wants
	// included (a removal); each Service's are found in it by name.
	Failed []status.Object
}

// State is the view of the named Services, or of all if none is named, in
// the order of their names; a named Service that wants nothing is left out.
func State(s Services, names []types.NamespacedName) view.State {
	if len(names) == 0 {
		for n := range s.Wanted {
			names = append(names, n)
		}
	}
	slices.SortFunc(names, func(a, b types.NamespacedName) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	out := view.State{Services: []view.Service{}, Failed: s.Failed}
	failed := byName(s.Failed)
	for _, n := range names {
		if w, ok := s.Wanted[n]; ok {
			out.Services = append(out.Services, service(n, w, s, failed))
		}
	}
	return out
}

// failures are the failed objects by kind and name, and the failed real
// servers by the name of their virtual server.
type failures struct {
	byName map[kindName]status.Object
	reals  map[string][]status.Object
}

type kindName struct {
	kind status.Kind
	name string
}

// byName indexes failed: a real server is named after its virtual server
// ("10.96.0.1:80/TCP 10.244.0.1:8080", see status.NewMemberTable).
func byName(failed []status.Object) failures {
	f := failures{byName: map[kindName]status.Object{}, reals: map[string][]status.Object{}}
	for _, o := range failed {
		if o.Kind == status.KindRealServer {
			vs, _, _ := strings.Cut(o.Object, " ")
			f.reals[vs] = append(f.reals[vs], o)
			continue
		}
		f.byName[kindName{o.Kind, o.Object}] = o
	}
	return f
}

// add appends the failed object of this kind and name to out, if it failed.
func (f failures) add(out []status.Object, kind status.Kind, name string) []status.Object {
	if o, ok := f.byName[kindName{kind, name}]; ok {
		return append(out, o)
	}
	return out
}

// service is one Service's view: each object it wants, whether it is held,
// and the objects whose last write failed.
func service(name types.NamespacedName, w desired.Keys, all Services, f failures) view.Service {
	s := view.Service{Name: name.String(), Programmed: all.Programmed[name]}
	b := all.Belief
	for _, k := range w.VirtualServers {
		v, ok := all.WantOf(k, name)
		if !ok {
			continue // never: a Service's keys are those it wants
		}
		have, reals, held := b.VirtualServer(k)
		s.VirtualServers = append(s.VirtualServers, virtualServer(v, have, reals, held))
		s.Failed = f.add(s.Failed, status.KindVirtualServer, k.String())
		s.Failed = append(s.Failed, f.reals[k.String()]...)
	}
	for _, a := range w.Addresses {
		s.Addresses = append(s.Addresses, view.Member{Object: a.String(), Held: b.Address(a)})
		s.Failed = f.add(s.Failed, status.KindAddress, a.String())
	}
	for _, e := range w.Entries {
		s.Entries = append(s.Entries, view.Member{Object: e.String(), Held: b.Entry(e)})
		s.Failed = f.add(s.Failed, status.KindSetEntry, e.String())
	}
	return s
}

// virtualServer is a wanted virtual server beside what is held of it (have
// and reals, if held): its wanted real servers, then those held and no
// longer wanted (those that drain).
func virtualServer(v desired.VirtualServer, have objects.VirtualServer, reals *realset.Set, held bool) view.VirtualServer {
	vs := view.VirtualServer{Key: v.Virtual.Key.String(), Scheduler: v.Virtual.Scheduler, Flags: v.Virtual.Flags, Timeout: v.Virtual.Timeout,
		Held: held && have == v.Virtual}
	wanted := map[netip.AddrPort]bool{}
	for _, rs := range v.Reals {
		wanted[rs.ID()] = true
		cur, ok := reals.Get(rs.ID())
		vs.Reals = append(vs.Reals, view.Real{Address: rs.ID().String(), Weight: int(rs.Weight), Wanted: true, Held: ok && cur.Weight == rs.Weight})
	}
	for _, cur := range reals.Members() {
		if !wanted[cur.ID()] {
			vs.Reals = append(vs.Reals, view.Real{Address: cur.ID().String(), Weight: int(cur.Weight), Held: true})
		}
	}
	return vs
}

// Programmed records when each Service was last fully programmed: a
// Service whose wants changed is pending until a sync leaves none of its
// objects dirty.
type Programmed struct {
	at      map[types.NamespacedName]time.Time
	pending map[types.NamespacedName]bool
}

func NewProgrammed() *Programmed {
	return &Programmed{at: map[types.NamespacedName]time.Time{}, pending: map[types.NamespacedName]bool{}}
}

// Changed records that a Service's wants changed, or that it wants
// nothing any more (gone).
func (p *Programmed) Changed(name types.NamespacedName, gone bool) {
	if gone {
		delete(p.at, name)
		delete(p.pending, name)
		return
	}
	p.pending[name] = true
}

// Settle stamps with now the pending Services that clean says have no
// dirty object: written, or as wanted already.
func (p *Programmed) Settle(now time.Time, clean func(types.NamespacedName) bool) {
	held := len(p.pending)
	for name := range p.pending {
		if clean(name) {
			p.at[name] = now
			delete(p.pending, name)
		}
	}
	if len(p.pending) == 0 && held > 1024 {
		// A map keeps the size it once had: a cold start's held every
		// Service (4.7 MB at 50k).
		p.pending = map[types.NamespacedName]bool{}
	}
}

// At is when each Service was last fully programmed.
func (p *Programmed) At() map[types.NamespacedName]time.Time { return p.at }
