// Package owners maps each desired kernel object to the Services that want
// it. Most objects have one owner; a shared one (an address or ipset entry
// two Services need) stays until its last owner lets go. Only virtual
// servers carry a value owners could disagree on, and the proxier's claims
// give each of those to one Service before the reconciler records it.
package owners

import (
	"k8s.io/apimachinery/pkg/types"
)

// Map holds the owners of each wanted key, and the value each wants of it:
// a key is in the map while some Service wants it.
type Map[K comparable, V any] map[K]owned[V]

// owned holds an object's first owner inline: a map per object, for the one
// in a thousand that has a second owner, cost ~1 KB per object at 10k
// Services.
type owned[V any] struct {
	owner types.NamespacedName
	value V
	more  map[types.NamespacedName]V // further owners, if any
}

// Add records that owner wants k as v, replacing what it wanted before.
func (o Map[K, V]) Add(k K, owner types.NamespacedName, v V) {
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

// Remove records that owner no longer wants k.
func (o Map[K, V]) Remove(k K, owner types.NamespacedName) {
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

// Owner is a Service that wants k, or zero if none does.
func (o Map[K, V]) Owner(k K) types.NamespacedName { return o[k].owner }

// Of is what owner wants of k, and whether it wants k.
func (o Map[K, V]) Of(k K, owner types.NamespacedName) (V, bool) {
	cur, ok := o[k]
	if !ok || cur.owner == owner {
		return cur.value, ok
	}
	v, ok := cur.more[owner]
	return v, ok
}

// Get is what an owner of k wants of it, and whether any Service wants k.
func (o Map[K, V]) Get(k K) (V, bool) {
	cur, ok := o[k]
	return cur.value, ok
}
