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
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
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
		r.setService(testobj.Name(fmt.Sprint(i)), state(vip.String(), 80, reals...))
	}
	if errs := r.apply(); len(errs) > 0 {
		b.Fatal(errs)
	}
	k.Ops()
	b.ReportAllocs()
	b.ResetTimer()
	var longest time.Duration
	held := func(d time.Duration) { longest = max(longest, d) }
	for i := 0; i < b.N; i++ {
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
		if errs := append(r.drain(v, w), r.apply()...); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(longest.Microseconds()), "max-hold-µs")
	if ops := k.Ops(); len(ops) > 0 {
		b.Fatalf("a drift check of a converged kernel wrote %d objects", len(ops))
	}
}

// sinkKernel takes every write and keeps nothing, so that a measurement of
// the heap sees the reconciler's memory alone.
type sinkKernel struct{}

func (sinkKernel) VirtualServers() ([]ipvs.VirtualServer, error) { return nil, nil }
func (sinkKernel) GetVirtualServer(ipvs.Key) (ipvs.VirtualServer, bool, error) {
	return ipvs.VirtualServer{}, false, nil
}
func (sinkKernel) RealServers(ipvs.Key) ([]ipvs.RealServer, error) { return nil, nil }
func (sinkKernel) Write(ops []ipvs.Op) []error                     { return make([]error, len(ops)) }
func (sinkKernel) EnsureLink() error                               { return nil }
func (sinkKernel) Exists() (bool, error)                           { return true, nil }
func (sinkKernel) Addresses() ([]netip.Addr, error)                { return nil, nil }
func (sinkKernel) AddAddresses(a []netip.Addr) []error             { return make([]error, len(a)) }
func (sinkKernel) DeleteAddresses(a []netip.Addr) []error          { return make([]error, len(a)) }
func (sinkKernel) EnsureSet(ipset.Set) error                       { return nil }
func (sinkKernel) Entries(string) ([]ipset.Entry, error)           { return nil, nil }
func (sinkKernel) Count(string) (int, error)                       { return 0, nil }
func (sinkKernel) Has(string, ipset.Entry) (bool, error)           { return false, nil }
func (sinkKernel) AddEntries(_ string, e []ipset.Entry) []error    { return make([]error, len(e)) }
func (sinkKernel) DeleteEntries(_ string, e []ipset.Entry) []error { return make([]error, len(e)) }
func (sinkKernel) Capacity(string) (int, error)                    { return 1 << 30, nil }
func (sinkKernel) Grow(ipset.Set, uint32) error                    { return nil }

// BenchmarkConvergedHeap reports the heap the reconciler keeps for 10k
// Services × 10 endpoints once they are programmed (desired state and
// belief; the informers' caches are not counted), as live-MB.
func BenchmarkConvergedHeap(b *testing.B) {
	cfg := &desired.Config{Scheduler: "rr"}
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var k sinkKernel
		r := New(Kernel{IPVS: k, Links: k, Sets: k}, Options{SetNames: []string{desired.SetClusterIP, desired.SetIPVSIPs}})
		for s := 0; s < 10000; s++ {
			service := testobj.Service(fmt.Sprintf("10.96.%d.%d", s>>8, s&0xff), testobj.Port("http", v1.ProtocolTCP, 80))
			service.Name = fmt.Sprint("s", s)
			var eps []testobj.EP
			for e := 0; e < 10; e++ {
				eps = append(eps, testobj.EP{IP: fmt.Sprintf("10.%d.%d.%d", 100+e, s>>8, s&0xff), Ready: testobj.Yes})
			}
			st, _ := desired.Compute(service, []*discovery.EndpointSlice{testobj.Slice("e", []discovery.EndpointPort{testobj.SlicePort("http", v1.ProtocolTCP, 8080)}, eps...)}, cfg, desired.Node{})
			r.setService(types.NamespacedName{Namespace: "ns", Name: service.Name}, st)
		}
		if errs := r.apply(); len(errs) > 0 {
			b.Fatal(errs)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "live-MB")
		runtime.KeepAlive(r)
	}
}
