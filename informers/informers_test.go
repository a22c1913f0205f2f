package informers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// slowHandler counts what it was given, slowly, and what it had been given
// when each cache was reported synced.
type slowHandler struct {
	mu                           sync.Mutex
	services, slices             int
	managedFields                int // objects given with managed fields
	servicesAtSync, slicesAtSync int
	synced                       chan struct{}
}

func (h *slowHandler) add(n *int) {
	time.Sleep(20 * time.Microsecond)
	h.mu.Lock()
	*n++
	h.mu.Unlock()
}

func (h *slowHandler) OnServiceAdd(s *v1.Service) {
	if len(s.ManagedFields) > 0 {
		h.add(&h.managedFields)
	}
	h.add(&h.services)
}
func (h *slowHandler) OnServiceUpdate(_, _ *v1.Service)                    {}
func (h *slowHandler) OnServiceDelete(*v1.Service)                         {}
func (h *slowHandler) OnEndpointSliceAdd(*discovery.EndpointSlice)         { h.add(&h.slices) }
func (h *slowHandler) OnEndpointSliceUpdate(_, _ *discovery.EndpointSlice) {}
func (h *slowHandler) OnEndpointSliceDelete(*discovery.EndpointSlice)      {}
func (h *slowHandler) OnNodeChange(*v1.Node)                               {}

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

// A first sync must see every object: the proxier deletes what it does not
// see, so "synced" may only be reported once the handlers have all of it.
func TestSyncedOnlyAfterHandlersSawTheWholeList(t *testing.T) {
	const n = 3000
	var objs []runtime.Object
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("s%d", i)
		objs = append(objs,
			&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}}},
			&discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
				Labels: map[string]string{discovery.LabelServiceName: name}}})
	}
	client := fake.NewSimpleClientset(objs...) //nolint:staticcheck
	h := &slowHandler{synced: make(chan struct{}, 2)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := Start(ctx, client, "node", time.Hour, h, h, h); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		select {
		case <-h.synced:
		case <-time.After(time.Minute):
			t.Fatal("caches never reported synced")
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.managedFields > 0 {
		t.Errorf("%d services reached the handlers with managed fields; the caches should not hold them", h.managedFields)
	}
	if h.servicesAtSync != n || h.slicesAtSync != n {
		t.Errorf("synced reported after %d of %d services and %d of %d slices reached the handlers",
			h.servicesAtSync, n, h.slicesAtSync, n)
	}
}
