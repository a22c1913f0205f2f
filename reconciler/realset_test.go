package reconciler

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestRealSetBehavesAsAMapSmallAndLarge drives a realSet and a map through
// the same adds, updates and removals, across the size where the set
// starts indexing and back.
func TestRealSetBehavesAsAMapSmallAndLarge(t *testing.T) {
	rs := func(i, w int) ipvs.RealServer {
		return ipvs.RealServer{Address: netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)}), Port: 8080, Weight: w}
	}
	s := newRealSet(nil)
	want := map[netip.AddrPort]ipvs.RealServer{}
	check := func(step string) {
		t.Helper()
		if s.len() != len(want) {
			t.Fatalf("%s: %d members, want %d", step, s.len(), len(want))
		}
		for id, w := range want {
			if got, ok := s.get(id); !ok || got != w {
				t.Fatalf("%s: get(%s) = %+v, %v; want %+v", step, id, got, ok, w)
			}
		}
		if _, ok := s.get(netip.MustParseAddrPort("192.0.2.1:1")); ok {
			t.Fatalf("%s: found a member never added", step)
		}
	}
	for i := 0; i < 3*smallRealSet; i++ {
		s.put(rs(i, 1))
		want[rs(i, 1).ID()] = rs(i, 1)
		if i%7 == 0 {
			s.put(rs(i, 0)) // an update, not a second member
			want[rs(i, 0).ID()] = rs(i, 0)
		}
		check(fmt.Sprintf("after adding %d", i))
	}
	for i := 0; i < 3*smallRealSet; i += 2 {
		s.remove(rs(i, 0).ID())
		delete(want, rs(i, 0).ID())
		check(fmt.Sprintf("after removing %d", i))
	}
	s.remove(rs(0, 0).ID()) // already gone
	check("after removing a missing member")

	a, b := newRealSet([]ipvs.RealServer{rs(1, 1), rs(2, 1)}), newRealSet([]ipvs.RealServer{rs(2, 1), rs(1, 1)})
	if !sameWeights(a, b) || sameWeights(a, newRealSet([]ipvs.RealServer{rs(1, 1), rs(2, 0)})) || sameWeights(a, nil) {
		t.Fatal("sameWeights: order must not matter, weights and members must")
	}
	var none *realSet
	if none.len() != 0 || len(none.members()) != 0 || !sameWeights(none, newRealSet(nil)) {
		t.Fatal("a nil set is an empty one")
	}
}
