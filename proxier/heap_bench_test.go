package proxier

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/informers"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// BenchmarkHeapByOwner reports the live heap of a proxier programmed with
// HEAP_SERVICES (10,000 unless set) Services of 10 endpoints each, as the
// bench creates them, by owner: the informers' caches (objects as client-go
// decodes them from protobuf, slimmed), then what the proxier keeps once its
// first sync has programmed a kernel that keeps nothing (the change
// tracker's indexes, desired state, claims and the reconciler's want and
// belief). It reports too the heap's pages in use after the caches and
// after the sync (inuse-MB): a long-lived object allocated among garbage
// of its size holds its page when the garbage is gone, and pages in use
// are what the node pays for. HEAP_PROFILE names a file for the heap
// profile at the end, to split the proxier's share further with go tool
// pprof.
//
//	HEAP_SERVICES=50000 go test ./proxier -run - -bench HeapByOwner -benchtime 1x
func BenchmarkHeapByOwner(b *testing.B) {
	n := 10000
	if s := os.Getenv("HEAP_SERVICES"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i++ {
		base, baseInuse := liveMB(), inuseMB()
		svcs, eps := cache.NewStore(cache.MetaNamespaceKeyFunc), cache.NewStore(cache.MetaNamespaceKeyFunc)
		for s := 0; s < n; s++ {
			if err := svcs.Add(decoded(heapService(s), &v1.Service{})); err != nil {
				b.Fatal(err)
			}
			if err := eps.Add(decoded(heapSlice(s), &discovery.EndpointSlice{})); err != nil {
				b.Fatal(err)
			}
		}
		caches, cachesInuse := liveMB(), inuseMB()

		ipt := &iptables.Fake{}
		cfg := Config{Desired: desired.Config{NodeName: "me", Scheduler: "rr"}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour}
		var k fakekernel.Sink
		p := New(cfg, Kernel{IPVS: k, Links: k, Sets: k, IPTables: ipt}, zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
		for _, o := range svcs.List() {
			p.OnServiceAdd(o.(*desired.Service))
		}
		for _, o := range eps.List() {
			p.OnEndpointSliceAdd(o.(*desired.Slice))
		}
		p.OnServicesSynced()
		p.OnEndpointSlicesSynced()
		p.SyncNow()
		ipt.Payloads = nil
		programmed, programmedInuse := liveMB(), inuseMB()

		b.ReportMetric(caches-base, "caches-MB")
		b.ReportMetric(programmed-caches, "proxier-MB")
		b.ReportMetric(cachesInuse-baseInuse, "caches-inuse-MB")
		b.ReportMetric(programmedInuse-cachesInuse, "proxier-inuse-MB")
		if path := os.Getenv("HEAP_PROFILE"); path != "" {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		runtime.KeepAlive(p)
		runtime.KeepAlive(svcs)
		runtime.KeepAlive(eps)
	}
}

// inuseMB is the heap's pages in use after a collection, in MiB.
func inuseMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapInuse) / (1 << 20)
}

func liveMB() float64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

type protoObject interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// decoded is obj as an informer holds it: decoded from protobuf into out
// (fresh strings and slices, as client-go's decoder makes them), slimmed.
func decoded[T protoObject](obj T, out T) any {
	raw, err := obj.Marshal()
	if err != nil {
		panic(err)
	}
	if err := out.Unmarshal(raw); err != nil {
		panic(err)
	}
	slim, _ := informers.Slim(out)
	return slim
}

// heapService is Service i as the apiserver answers for one the bench made.
func heapService(i int) *v1.Service {
	ip := fmt.Sprintf("10.%d.%d.%d", 96+i>>16, i>>8&0xff, i&0xff)
	return &v1.Service{
		ObjectMeta: heapMeta(fmt.Sprintf("svc-%05d", i), i, nil),
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports:           []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
			SessionAffinity: v1.ServiceAffinityNone, IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			IPFamilyPolicy: ptr.To(v1.IPFamilyPolicySingleStack), InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyCluster)},
	}
}

// heapSlice is Service i's EndpointSlice as the EndpointSlice controller
// writes it: 10 ready endpoints on another node, each naming its Pod.
func heapSlice(i int) *discovery.EndpointSlice {
	name := fmt.Sprintf("svc-%05d", i)
	s := &discovery.EndpointSlice{
		ObjectMeta: heapMeta(name+"-x7k2p", i, map[string]string{discovery.LabelServiceName: name,
			discovery.LabelManagedBy: "endpointslice-controller.k8s.io"}),
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-11-27T20:00:00Z"}
	for j := 0; j < 10; j++ {
		a := 10*i + j
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 128+a>>16, a>>8&0xff, a&0xff)},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To("other-node"),
			TargetRef:  &v1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: fmt.Sprintf("%s-%d", name, j), UID: types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, j))},
		})
	}
	return s
}

func heapMeta(name string, i int, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "bench", UID: types.UID(fmt.Sprintf("%08x-1111-4000-8000-%012x", i, i)),
		ResourceVersion: strconv.Itoa(1000 + i), Generation: 1, Labels: labels,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 11, 27, 20, 0, 0, 0, time.UTC)),
		ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1"}}}
}
