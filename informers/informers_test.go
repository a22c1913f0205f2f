package informers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeclient/clientset"
)

// slowHandler counts what it was given, slowly, and what it had been given
// when each cache was reported synced.
type slowHandler struct {
	mu                           sync.Mutex
	services, slices             int
	servicesAtSync, slicesAtSync int
	synced                       chan struct{}
}

func (h *slowHandler) add(n *int) {
	time.Sleep(20 * time.Microsecond)
	h.mu.Lock()
	*n++
	h.mu.Unlock()
}

func (h *slowHandler) OnServiceAdd(*desired.Service)             { h.add(&h.services) }
func (h *slowHandler) OnServiceUpdate(_, _ *desired.Service)     {}
func (h *slowHandler) OnServiceDelete(*desired.Service)          {}
func (h *slowHandler) OnEndpointSliceAdd(*desired.Slice)         { h.add(&h.slices) }
func (h *slowHandler) OnEndpointSliceUpdate(_, _ *desired.Slice) {}
func (h *slowHandler) OnEndpointSliceDelete(*desired.Slice)      {}
func (h *slowHandler) OnNodeChange(*v1.Node)                     {}

func (h *slowHandler) OnServicesSynced() {
	h.mu.Lock()
	h.servicesAtSync = h.services
	h.mu.Unlock()
	h.synced <- struct{}{}
}

func (h *slowHandler) OnEndpointSlicesSynced() {
	h.mu.Lock()
	h.slicesAtSync = h.slices
	h.mu.Unlock()
	h.synced <- struct{}{}
}

// startSynced starts the informers on client until the test ends, and
// waits for both Synced handlers to have been called (each sends on synced).
func startSynced(t *testing.T, client *fake.Clientset, svc ServiceHandler, eps EndpointSliceHandler, node NodeHandler, synced chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := Start(ctx, clientset.Client{Interface: client}, "node", time.Hour, svc, eps, node, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		select {
		case <-synced:
		case <-time.After(time.Minute):
			t.Fatal("caches never reported synced")
		}
	}
}

// A first sync must see every object: the proxier deletes what it does not
// see, so "synced" may only be reported once the handlers have all of it.
func TestSyncedOnlyAfterHandlersSawTheWholeList(t *testing.T) {
	const n = 3000
	var objs []runtime.Object
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("s%d", i)
		objs = append(objs,
			&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}},
			&discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
				Labels: map[string]string{discovery.LabelServiceName: name}}})
	}
	client := fake.NewSimpleClientset(objs...) //nolint:staticcheck
	h := &slowHandler{synced: make(chan struct{}, 2)}
	startSynced(t, client, h, h, h, h.synced)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.servicesAtSync != n || h.slicesAtSync != n {
		t.Errorf("synced reported after %d of %d services and %d of %d slices reached the handlers",
			h.servicesAtSync, n, h.slicesAtSync, n)
	}
}

func TestSlimKeepsWhatTheProxierReads(t *testing.T) {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "7",
			Labels: map[string]string{discovery.LabelServiceName: "web"},
			Annotations: map[string]string{lastAppliedAnnotation: "{...}", "team": "a", v1.EndpointsLastChangeTriggerTime: "2026-11-23T10:00:00Z",
				desired.SchedulerAnnotation: "lc"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Service", Name: "web"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}
	}
	svc := &v1.Service{ObjectMeta: meta(), Spec: v1.ServiceSpec{ClusterIP: "10.96.0.5", Selector: map[string]string{"app": "web"},
		IPFamilies: []v1.IPFamily{v1.IPv4Protocol}, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http"), AppProtocol: ptr.To("h2c")}}},
		Status: v1.ServiceStatus{Conditions: []metav1.Condition{{Type: "Ready"}}}}
	out, err := Slim(svc)
	if err != nil {
		t.Fatal(err)
	}
	readSvc, ok := out.(*desired.Service)
	if !ok {
		t.Fatalf("a Service slimmed to a %T, want a *desired.Service", out)
	}
	if readSvc.Scheduler == nil || *readSvc.Scheduler != "lc" || readSvc.ClusterIP != "10.96.0.5" || readSvc.ResourceVersion != "7" ||
		len(readSvc.Ports) != 1 || readSvc.Ports[0].Port != 80 {
		t.Errorf("service lost what the proxier reads: %+v", readSvc)
	}
	if key, err := cache.MetaNamespaceKeyFunc(readSvc); err != nil || key != "ns/web" {
		t.Errorf("the cache keys the Service as %q (%v), want ns/web", key, err)
	}

	slice := &discovery.EndpointSlice{ObjectMeta: meta(), Endpoints: []discovery.Endpoint{{
		Addresses: []string{"10.244.0.5"}, NodeName: ptr.To("n1"),
		TargetRef: &v1.ObjectReference{Kind: "Pod", Name: "web-1"}, DeprecatedTopology: map[string]string{"a": "b"}}}}
	out, err = Slim(slice)
	if err != nil {
		t.Fatal(err)
	}
	read, ok := out.(*desired.Slice)
	if !ok {
		t.Fatalf("a slice slimmed to a %T, want a *desired.Slice", out)
	}
	if read.TriggerTime.IsZero() || read.Endpoints[0].Address != "10.244.0.5" || read.Endpoints[0].NodeName != "n1" ||
		read.Service != "web" || read.ResourceVersion != "7" {
		t.Errorf("slice lost what the proxier reads: %+v", read)
	}
	if key, err := cache.MetaNamespaceKeyFunc(read); err != nil || key != "ns/web" {
		t.Errorf("the cache keys the slice as %q (%v), want ns/web", key, err)
	}
	// The informer tells an update from a resync by the resource version
	// (after its first resync check, which no test waits for).
	if m, err := apimeta.Accessor(read); err != nil || m.GetResourceVersion() != "7" {
		t.Errorf("the informer reads the slice's resource version as %v (%v), want 7", m, err)
	}
}

// namesHandler records the names of the Services and slices it is given.
type namesHandler struct {
	mu               sync.Mutex
	services, slices []string
	synced           chan struct{}
}

func (h *namesHandler) OnServiceAdd(s *desired.Service) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.services = append(h.services, s.Name)
}
func (h *namesHandler) OnEndpointSliceAdd(s *desired.Slice) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.slices = append(h.slices, s.Name)
}
func (h *namesHandler) OnServiceUpdate(_, _ *desired.Service)     {}
func (h *namesHandler) OnServiceDelete(*desired.Service)          {}
func (h *namesHandler) OnEndpointSliceUpdate(_, _ *desired.Slice) {}
func (h *namesHandler) OnEndpointSliceDelete(*desired.Slice)      {}
func (h *namesHandler) OnNodeChange(*v1.Node)                     {}
func (h *namesHandler) OnServicesSynced()                         { h.synced <- struct{}{} }
func (h *namesHandler) OnEndpointSlicesSynced()                   { h.synced <- struct{}{} }

// The informers filter as kube-proxy v1.37's do: Services on the proxy
// name alone, slices on the headless label alone (v1.34 filtered both on
// both). A Service that names another proxy, and its slices, are still
// not programmed: a slice without its Service is nobody's.
func TestInformersFilterAsKubeProxy137(t *testing.T) {
	labelled := func(label string) map[string]string {
		if label == "" {
			return nil
		}
		return map[string]string{label: "x"}
	}
	svc := func(name, label string) runtime.Object {
		return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labelled(label)}}
	}
	slice := func(name, label string) runtime.Object {
		l := labelled(label)
		if l == nil {
			l = map[string]string{}
		}
		l[discovery.LabelServiceName] = name
		return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: l}}
	}
	const proxyName, headless = "service.kubernetes.io/service-proxy-name", "service.kubernetes.io/headless"
	client := fake.NewSimpleClientset( //nolint:staticcheck
		svc("plain", ""), svc("other-proxy", proxyName), svc("headless-label", headless),
		slice("plain", ""), slice("other-proxy", proxyName), slice("headless-label", headless))
	h := &namesHandler{synced: make(chan struct{}, 2)}
	startSynced(t, client, h, h, h, h.synced)
	h.mu.Lock()
	defer h.mu.Unlock()
	slices.Sort(h.services)
	slices.Sort(h.slices)
	if want := []string{"headless-label", "plain"}; !slices.Equal(h.services, want) {
		t.Errorf("services %v, want %v", h.services, want)
	}
	if want := []string{"other-proxy", "plain"}; !slices.Equal(h.slices, want) {
		t.Errorf("slices %v, want %v", h.slices, want)
	}
}

// sliceRecorder records the slice events it is given, as "add ns/name
// address", "update ...", "delete ...".
type sliceRecorder struct {
	namesHandler
	events chan string
}

func (h *sliceRecorder) OnEndpointSliceAdd(s *desired.Slice) { h.events <- "add " + describe(s) }
func (h *sliceRecorder) OnEndpointSliceUpdate(old, cur *desired.Slice) {
	h.events <- "update " + describe(old) + " to " + describe(cur)
}
func (h *sliceRecorder) OnEndpointSliceDelete(s *desired.Slice) { h.events <- "delete " + describe(s) }

func describe(s *desired.Slice) string {
	out := s.Namespace + "/" + s.Name
	for _, e := range s.Endpoints {
		out += " " + e.Address
	}
	return out
}

// The cache holds a slice as a desired.Slice: its add, update and delete
// reach the handler as desired.Slices, the update with the one it replaced.
func TestSliceEventsThroughTheCache(t *testing.T) {
	slice := func(rv, addr string) *discovery.EndpointSlice {
		return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", ResourceVersion: rv,
			Labels: map[string]string{discovery.LabelServiceName: "web"}}, AddressType: discovery.AddressTypeIPv4,
			Endpoints: []discovery.Endpoint{{Addresses: []string{addr}}}}
	}
	client := fake.NewSimpleClientset(slice("1", "10.244.0.1")) //nolint:staticcheck
	h := &sliceRecorder{namesHandler: namesHandler{synced: make(chan struct{}, 2)}, events: make(chan string, 10)}
	startSynced(t, client, h, h, h, h.synced)
	next := func(want string) {
		t.Helper()
		select {
		case got := <-h.events:
			if got != want {
				t.Fatalf("event %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no event, want %q", want)
		}
	}
	next("add ns/web-1 10.244.0.1")
	ctx := context.Background()
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(ctx, slice("2", "10.244.0.2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	next("update ns/web-1 10.244.0.1 to ns/web-1 10.244.0.2")
	if err := client.DiscoveryV1().EndpointSlices("ns").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next("delete ns/web-1 10.244.0.2")
}
