package reconciler

import (
	"k8s.io/apimachinery/pkg/types"
)

// owners maps each desired kernel object to the Services that want it. Most
// objects have one owner; a shared one (an address or ipset entry two
// Services need) stays until its last owner lets go. Only virtual servers
// carry a value owners could disagree on, and claims gives each of those to
// one Service before it gets here.
type owners[K comparable, V any] map[K]owned[V]

// owned holds an object's first owner inline: a map per object, for the one
// in a thousand that has a second owner, cost ~1 KB per object at 10k
// Services.
type owned[V any] struct {
	owner types.NamespacedName
	value V
	more  map[types.NamespacedName]V // further owners, if any
}

func (o owners[K, V]) add(k K, owner types.NamespacedName, v V) {
	cur, ok := o[k]
	switch {
	case !ok || cur.owner == owner:
		cur.owner, cur.value = owner, v
	default:
		if cur.more == nil {
			cur.more = map[types.NamespacedName]V{}
		}
		cur.more[owner] = v
	}
	o[k] = cur
}

func (o owners[K, V]) remove(k K, owner types.NamespacedName) {
	cur, ok := o[k]
	switch {
	case !ok:
		return
	case cur.owner != owner:
		delete(cur.more, owner)
	case len(cur.more) == 0:
		delete(o, k)
		return
	default: // promote any other owner
		for n, v := range cur.more {
			cur.owner, cur.value = n, v
			delete(cur.more, n)
			break
		}
	}
	if len(cur.more) == 0 {
		cur.more = nil
	}
	o[k] = cur
}

// owner is a Service that wants k, or zero if none does.
func (o owners[K, V]) owner(k K) types.NamespacedName { return o[k].owner }

func (o owners[K, V]) get(k K) (V, bool) {
	cur, ok := o[k]
	return cur.value, ok
}
