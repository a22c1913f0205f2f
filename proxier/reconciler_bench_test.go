package proxier

import (
	"fmt"
	"net/netip"
	"testing"
)

// BenchmarkDriftCheck is one periodic drift check of a converged reconciler
// at 10k Services × 10 endpoints against the fakes: the kernel read, adopt,
// the apply of everything it marks dirty and drain. It shows the sync
// goroutine's share (adopt and apply) of the real drift check's CPU.
func BenchmarkDriftCheck(b *testing.B) {
	k := newFakeKernel(&testing.T{})
	r := k.reconciler()
	for i := 0; i < 10000; i++ {
		vip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		var reals []string
		for j := 0; j < 10; j++ {
			reals = append(reals, fmt.Sprintf("10.%d.%d.%d:8080", 100+j, byte(i>>8), byte(i)))
		}
		r.setService(name(fmt.Sprint(i)), state(vip.String(), 80, reals...))
	}
	if errs := r.apply(); len(errs) > 0 {
		b.Fatal(errs)
	}
	k.ops()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.refresh(); err != nil {
			b.Fatal(err)
		}
		if errs := r.apply(); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
	b.StopTimer()
	if ops := k.ops(); len(ops) > 0 {
		b.Fatalf("a drift check of a converged kernel wrote %d objects", len(ops))
	}
}
