package realset

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// TestSetBehavesAsAMapSmallAndLarge drives a Set and a map through
// the same adds, updates and removals, across the size where the set
// starts indexing and back.
func TestSetBehavesAsAMapSmallAndLarge(t *testing.T) {
	rs := func(i, w int) objects.RealServer {
		return objects.RealServer{Address: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), Port: 8080, Weight: int32(w)}
	}
	s := New(nil)
	want := map[netip.AddrPort]objects.RealServer{}
	check := func(step string) {
		t.Helper()
		if s.Len() != len(want) {
			t.Fatalf("%s: %d members, want %d", step, s.Len(), len(want))
		}
		for id, w := range want {
			if got, ok := s.Get(id); !ok || got != w {
				t.Fatalf("%s: Get(%s) = %+v, %v; want %+v", step, id, got, ok, w)
			}
		}
		if _, ok := s.Get(netip.MustParseAddrPort("192.0.2.1:1")); ok {
			t.Fatalf("%s: found a member never added", step)
		}
	}
	for i := 0; i < 3*small; i++ {
		s.Put(rs(i, 1))
		want[rs(i, 1).ID()] = rs(i, 1)
		if i%7 == 0 {
			s.Put(rs(i, 0)) // an update, not a second member
			want[rs(i, 0).ID()] = rs(i, 0)
		}
		check(fmt.Sprintf("after adding %d", i))
	}
	for i := 0; i < 3*small; i += 2 {
		s.Remove(rs(i, 0).ID())
		delete(want, rs(i, 0).ID())
		check(fmt.Sprintf("after removing %d", i))
	}
	s.Remove(rs(0, 0).ID()) // already gone
	check("after removing a missing member")

	a, b := New([]objects.RealServer{rs(1, 1), rs(2, 1)}), New([]objects.RealServer{rs(2, 1), rs(1, 1)})
	if !SameWeights(a, b) || SameWeights(a, New([]objects.RealServer{rs(1, 1), rs(2, 0)})) || SameWeights(a, nil) {
		t.Fatal("sameWeights: order must not matter, weights and members must")
	}
	var none *Set
	if none.Len() != 0 || len(none.Members()) != 0 || !SameWeights(none, New(nil)) {
		t.Fatal("a nil set is an empty one")
	}
}

func TestBorrowedListIsNeverChanged(t *testing.T) {
	a, b, c := rs("10.0.0.1", 1), rs("10.0.0.2", 1), rs("10.0.0.3", 1)
	wanted := []objects.RealServer{a, b}
	s := New(nil)
	s.Put(b)
	if s.Borrow(wanted) {
		t.Fatal("borrowed a list with a member the set lacks")
	}
	s.Put(rs("10.0.0.1", 2))
	if s.Borrow(wanted) {
		t.Fatal("borrowed a list of other weights")
	}
	read := a
	read.ActiveConns, read.InactiveConns = 3, 4 // as a read of the kernel has them
	s.Put(read)
	if !s.Borrow(wanted) {
		t.Fatal("did not borrow a list of the set's own members and weights")
	}
	drained := a
	drained.Weight = 0
	s.Put(drained)
	s.Remove(b.ID())
	s.Put(c)
	if wanted[0] != a || wanted[1] != b || len(wanted) != 2 {
		t.Fatalf("the borrowed list changed: %v", wanted)
	}
	if got, _ := s.Get(a.ID()); got.Weight != 0 || s.Len() != 2 {
		t.Fatalf("the set lost its own changes: %v", s.Members())
	}
}

func rs(addr string, weight int32) objects.RealServer {
	return objects.RealServer{Address: netip.MustParseAddr(addr), Port: 8080, Weight: weight}
}
