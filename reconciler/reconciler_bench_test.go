package reconciler

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

// BenchmarkDriftCheck is one periodic drift check of a converged reconciler
// at 10k Services × 10 endpoints against the fakes: the kernel read, adopt,
// the apply of everything it marks dirty and drain. It shows the sync
// goroutine's share (adopt and apply) of the real drift check's CPU, and
// the longest a sync waits for a background adopt (max-hold-µs).
func BenchmarkDriftCheck(b *testing.B) {
	k := fakekernel.New(&testing.T{})
	r := testReconciler(k)
	for i := 0; i < 10000; i++ {
		vip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		var reals []string
		for j := 0; j < 10; j++ {
			reals = append(reals, fmt.Sprintf("10.%d.%d.%d:8080", 100+j, byte(i>>8), byte(i)))
		}
		record(r, fmt.Sprint(i), state(vip.String(), 80, reals...))
	}
	r.Sync(nil, nil)
	if failed := r.Failed(); len(failed) > 0 {
		b.Fatal(failed)
	}
	k.Ops()
	b.ReportAllocs()
	b.ResetTimer()
	var longest time.Duration
	held := func(d time.Duration) { longest = max(longest, d) }
	for i := 0; i < b.N; i++ {
		// White-box: a drift check (CheckNow) whose adopt reports how
		// long it holds r.mu, which no call shows.
		r.beginRead()
		v, err := r.readKernel()
		if err != nil {
			b.Fatal(err)
		}
		r.mu.Lock()
		w, err := r.adopt(v, r.pacer(held))
		r.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
		r.Sync(nil, &CheckResult{view: v, written: w})
		if failed := r.Failed(); len(failed) > 0 {
			b.Fatal(failed)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(longest.Microseconds()), "max-hold-µs")
	if ops := k.Ops(); len(ops) > 0 {
		b.Fatalf("a drift check of a converged kernel wrote %d objects", len(ops))
	}
}

// BenchmarkConvergedHeap reports the heap the reconciler keeps for 10k
// Services × 10 endpoints once they are programmed (desired state and
// belief; the informers' caches are not counted), as live-MB.
func BenchmarkConvergedHeap(b *testing.B) {
	cfg := &desired.Config{Scheduler: "rr"}
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var k fakekernel.Sink
		r := New(Kernel{IPVS: k, Links: k, Sets: k}, Options{SetNames: []string{desired.SetClusterIP, desired.SetIPVSIPs}})
		for s := 0; s < 10000; s++ {
			service := testobj.Service(fmt.Sprintf("10.96.%d.%d", s>>8, s&0xff), testobj.Port("http", v1.ProtocolTCP, 80))
			service.Name = fmt.Sprint("s", s)
			var eps []testobj.EP
			for e := 0; e < 10; e++ {
				eps = append(eps, testobj.EP{IP: fmt.Sprintf("10.%d.%d.%d", 100+e, s>>8, s&0xff), Ready: testobj.Yes})
			}
			st, _ := desired.Compute(desired.ServiceOf(service), []*desired.Slice{desired.SliceOf(testobj.Slice("e", []discovery.EndpointPort{testobj.SlicePort("http", v1.ProtocolTCP, 8080)}, eps...))}, cfg, desired.Node{})
			r.Record([]Change{{Name: types.NamespacedName{Namespace: "ns", Name: service.Name}, State: st}})
		}
		r.Sync(nil, nil)
		if failed := r.Failed(); len(failed) > 0 {
			b.Fatal(failed)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "live-MB")
		runtime.KeepAlive(r)
	}
}
