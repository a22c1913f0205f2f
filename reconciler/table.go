package reconciler

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/owners"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// table is one kind of kernel object as the reconciler keeps it: what the
// Services want of each key (W, by owner), what the reconciler believes the
// kernel holds (H), the keys the next apply looks at, and the status of the
// keys whose last write failed. Every kind goes through the same operations:
//
//   - update and delete, when a Service wants a key (or wants it otherwise)
//     or lets it go: the key is marked dirty, and a failed one is due at once;
//   - drifted and take, when a drift check adopts a read of the kind
//     (adopt.go): drifted lists the keys where the read and the belief
//     differ, and take gives the belief the read of each, marking it dirty;
//   - apply's pass over the dirty keys, which the table's kind drives
//     (kind.go): it plans what differs, writes it in kernel batches and
//     records each key's outcome (wrote, believe or forget, status).
//
// Virtual servers, addresses and ipset entries are tables. A real server is
// a member of its virtual server's row: wanted in W, believed in H, written
// in the same batches, its failures kept by virtual server (package rsstatus).
type table[K comparable, W, H any] struct {
	want   owners.Map[K, W]
	have   map[K]H
	dirty  map[K]bool
	status status.Table[K]
	// written records the keys written while a drift check's read is in
	// flight: for them the belief is newer than the read (nil otherwise).
	written map[K]bool
	// counted, if not nil, is told when a key comes into the belief (+1) or
	// leaves it (-1).
	counted func(k K, delta int)
}

func newTable[K comparable, W, H any](kind status.Kind, retryMax time.Duration) table[K, W, H] {
	return table[K, W, H]{
		want: owners.Map[K, W]{}, have: map[K]H{}, dirty: map[K]bool{},
		status: status.NewTable[K](kind, retryMax),
	}
}

// update records that owner wants k as w.
func (t *table[K, W, H]) update(k K, owner types.NamespacedName, w W) {
	t.want.Add(k, owner, w)
	t.mark(k)
}

// delete records that owner no longer wants k.
func (t *table[K, W, H]) delete(k K, owner types.NamespacedName) {
	t.want.Remove(k, owner)
	t.mark(k)
}

// mark makes k dirty, and due at once if it failed: what is wanted of it
// may have changed.
func (t *table[K, W, H]) mark(k K) {
	t.dirty[k] = true
	t.status.RetryNow(k)
}

// wrote records a write of k, if a read is in flight.
func (t *table[K, W, H]) wrote(k K) {
	if t.written != nil {
		t.written[k] = true
	}
}

// believe records that the kernel holds k as h.
func (t *table[K, W, H]) believe(k K, h H) {
	if _, ok := t.have[k]; !ok && t.counted != nil {
		t.counted(k, 1)
	}
	t.have[k] = h
}

// forget records that the kernel does not hold k.
func (t *table[K, W, H]) forget(k K) {
	if _, ok := t.have[k]; ok {
		delete(t.have, k)
		if t.counted != nil {
			t.counted(k, -1)
		}
	}
}

// drifted returns the keys where a read of the kernel differs from the
// belief, leaving out keys written since the read began and those unread
// (nil: none) says the read did not look at. same compares a key that both
// hold; pause is called before each key (see pacer).
func (t *table[K, W, H]) drifted(read map[K]H, same func(k K, read, have H) bool, unread func(K) bool, pause func()) []K {
	var out []K
	differs := func(k K) bool {
		if t.written[k] || unread != nil && unread(k) {
			return false
		}
		r, inRead := read[k]
		h, believed := t.have[k]
		return inRead != believed || inRead && !same(k, r, h)
	}
	for k := range read {
		pause()
		if differs(k) {
			out = append(out, k)
		}
	}
	for k := range t.have {
		pause()
		if _, inRead := read[k]; !inRead && differs(k) {
			out = append(out, k)
		}
	}
	return out
}

// take gives the belief a read of k (present says whether the read found
// it) and marks k dirty, so that the next apply repairs the difference.
func (t *table[K, W, H]) take(k K, h H, present bool) {
	if present {
		t.believe(k, h)
	} else {
		t.forget(k)
	}
	t.dirty[k] = true
}

// beginRead starts recording written keys; endRead stops and returns them.
func (t *table[K, W, H]) beginRead() { t.written = map[K]bool{} }

func (t *table[K, W, H]) endRead() map[K]bool {
	w := t.written
	t.written = nil
	return w
}
