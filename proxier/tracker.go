package proxier

import (
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
)

// changeTracker holds the latest Service and EndpointSlice objects, indexed by
// Service, and the set of Services changed since the last sync. Many updates
// to one Service between syncs cost one re-computation; an update that
// changes nothing the proxier uses is dropped.
type changeTracker struct {
	mu       sync.Mutex
	services map[types.NamespacedName]*desired.Service
	// slices holds each Service's slices sorted by name: most Services
	// have one, for which a map would cost ~0.4 KB (17 MB at 50k).
	slices  map[types.NamespacedName][]*desired.Slice
	pending map[types.NamespacedName]*pendingChange
	// Edits queued in pending, kept as running sums because metrics read
	// them on every informer event.
	pendingServiceEdits, pendingSliceEdits int

	servicesSynced, slicesSynced bool
	// onChange is called (outside the lock) after a change is queued.
	onChange func()
}

// pendingChange is what is known about one changed Service.
type pendingChange struct {
	serviceEdits int
	sliceEdits   int
	triggers     []trigger // from the slices' last-change-trigger-time
}

// trigger is when the endpoints controller saw a change, and the IP family
// of the slice it produced.
type trigger struct {
	at     time.Time
	family desired.Family
}

func newChangeTracker(onChange func()) *changeTracker {
	return &changeTracker{
		services: map[types.NamespacedName]*desired.Service{},
		slices:   map[types.NamespacedName][]*desired.Slice{},
		pending:  map[types.NamespacedName]*pendingChange{},
		onChange: onChange,
	}
}

func (t *changeTracker) markLocked(name types.NamespacedName) *pendingChange {
	p := t.pending[name]
	if p == nil {
		p = &pendingChange{}
		t.pending[name] = p
	}
	return p
}

func (t *changeTracker) notify() {
	if t.onChange != nil {
		t.onChange()
	}
}

// serviceChanged says whether anything the proxier programs differs, or
// the Service is another of the same name (deleted and made again between
// two lists): its UID and age decide the claims it wins.
func serviceChanged(old, cur *desired.Service) bool {
	if old == nil || cur == nil {
		return old != cur
	}
	return !old.SameSpec(cur) || old.UID != cur.UID
}

func (t *changeTracker) setService(name types.NamespacedName, svc *desired.Service) {
	t.mu.Lock()
	old := t.services[name]
	if svc == nil {
		delete(t.services, name)
	} else {
		t.services[name] = svc
	}
	changed := serviceChanged(old, svc)
	if changed {
		t.markLocked(name).serviceEdits++
		t.pendingServiceEdits++
	}
	t.mu.Unlock()
	if changed {
		t.notify()
	}
}

func (t *changeTracker) OnServiceAdd(svc *desired.Service) {
	t.setService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, svc)
}

func (t *changeTracker) OnServiceUpdate(_, svc *desired.Service) { t.OnServiceAdd(svc) }

func (t *changeTracker) OnServiceDelete(svc *desired.Service) {
	t.setService(types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, nil)
}

func (t *changeTracker) OnServicesSynced() {
	t.mu.Lock()
	t.servicesSynced = true
	t.mu.Unlock()
	t.notify()
}

func sliceOwner(s *desired.Slice) (types.NamespacedName, bool) {
	return types.NamespacedName{Namespace: s.Namespace, Name: s.Service}, s.Service != ""
}

func sliceChanged(old, cur *desired.Slice) bool {
	if old == nil || cur == nil {
		return old != cur
	}
	return !old.SameEndpoints(cur)
}

func (t *changeTracker) setSlice(name string, owner types.NamespacedName, slice *desired.Slice) {
	t.mu.Lock()
	list := t.slices[owner]
	i, found := slices.BinarySearchFunc(list, name, func(s *desired.Slice, name string) int { return strings.Compare(s.Name, name) })
	var old *desired.Slice
	switch {
	case found && slice == nil:
		old = list[i]
		if list = slices.Delete(list, i, i+1); len(list) == 0 {
			delete(t.slices, owner)
		} else {
			t.slices[owner] = list
		}
	case found:
		old, list[i] = list[i], slice
	case slice != nil:
		t.slices[owner] = slices.Insert(list, i, slice)
	}
	changed := sliceChanged(old, slice)
	if changed {
		p := t.markLocked(owner)
		p.sliceEdits++
		t.pendingSliceEdits++
		if slice != nil {
			fam, ok := desired.SliceFamily(slice.AddressType)
			if ok && !slice.TriggerTime.IsZero() {
				p.triggers = append(p.triggers, trigger{slice.TriggerTime, fam})
			}
		}
	}
	t.mu.Unlock()
	if changed {
		t.notify()
	}
}

func (t *changeTracker) OnEndpointSliceAdd(s *desired.Slice) {
	if owner, ok := sliceOwner(s); ok {
		t.setSlice(s.Name, owner, s)
	}
}

// OnEndpointSliceUpdate handles a slice whose owner label changed as a move.
func (t *changeTracker) OnEndpointSliceUpdate(old, cur *desired.Slice) {
	if oldOwner, ok := sliceOwner(old); ok {
		if curOwner, _ := sliceOwner(cur); curOwner != oldOwner {
			t.setSlice(old.Name, oldOwner, nil)
		}
	}
	t.OnEndpointSliceAdd(cur)
}

func (t *changeTracker) OnEndpointSliceDelete(s *desired.Slice) {
	if owner, ok := sliceOwner(s); ok {
		t.setSlice(s.Name, owner, nil)
	}
}

func (t *changeTracker) OnEndpointSlicesSynced() {
	t.mu.Lock()
	t.slicesSynced = true
	t.mu.Unlock()
	t.notify()
}

// synced says whether both caches have delivered their initial list.
func (t *changeTracker) synced() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.servicesSynced && t.slicesSynced
}

// serviceInput is one Service and its slices as of a sync.
type serviceInput struct {
	name    types.NamespacedName
	service *desired.Service
	slices  []*desired.Slice
	change  *pendingChange // nil when the Service did not change
}

// take returns the inputs to sync and clears the pending set: the changed
// Services, or every known Service when all is true.
func (t *changeTracker) take(all bool) []serviceInput {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []serviceInput
	if all {
		out = make([]serviceInput, 0, len(t.services)+len(t.pending))
		for n := range t.services {
			out = append(out, t.input(n))
		}
	} else {
		out = make([]serviceInput, 0, len(t.pending))
	}
	for n := range t.pending {
		if !all || t.services[n] == nil {
			out = append(out, t.input(n))
		}
	}
	t.pending = map[types.NamespacedName]*pendingChange{}
	t.pendingServiceEdits, t.pendingSliceEdits = 0, 0
	return out
}

// peek returns the inputs of the named Services that are known or pending,
// leaving them pending: the first sync programs the critical Services from
// them before it takes (at 50k, ~0.5 s in the VM) every other input.
func (t *changeTracker) peek(names []types.NamespacedName) []serviceInput {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []serviceInput
	for _, n := range names {
		if t.services[n] != nil || t.pending[n] != nil {
			out = append(out, t.input(n))
		}
	}
	return out
}

// input gathers one Service's input; the caller holds mu.
func (t *changeTracker) input(n types.NamespacedName) serviceInput {
	in := serviceInput{name: n, service: t.services[n], change: t.pending[n]}
	if list := t.slices[n]; len(list) > 0 {
		in.slices = slices.Clone(list) // the tracker's changes in place after
	}
	return in
}

// touch queues the known Services that match for recomputation with no
// edit counted: something besides the objects (the node) changed.
func (t *changeTracker) touch(match func(*desired.Service) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, svc := range t.services {
		if match(svc) {
			t.markLocked(name)
		}
	}
}

// service returns the latest Service of that name, or nil.
func (t *changeTracker) service(n types.NamespacedName) *desired.Service {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.services[n]
}

// pendingCounts reports queued Service and EndpointSlice edits, for metrics.
func (t *changeTracker) pendingCounts() (services, slices int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pendingServiceEdits, t.pendingSliceEdits
}
