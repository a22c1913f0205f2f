// Package informers watches the apiserver for what the proxier needs:
// Services and EndpointSlices (minus those another proxy owns and headless
// ones) and this node's own Node object, and hands every event to handlers.
// It knows nothing about the kernel.
package informers

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeclient"
)

// Client lists and watches one resource: kubeclient.Client, or in tests an
// adapter over client-go's fake clientset.
type Client interface {
	ListWatch(r kubeclient.Resource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher
}

// inform starts an informer of r, its objects slimmed, with h its handler.
func inform(ctx context.Context, client Client, r kubeclient.Resource, namespace string, tweak func(*metav1.ListOptions),
	resync time.Duration, h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	inf := cache.NewSharedIndexInformer(client.ListWatch(r, namespace, tweak), r.Object(), resync, cache.Indexers{})
	if err := inf.SetTransform(Slim); err != nil {
		return nil, err
	}
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		return nil, fmt.Errorf("%s handler: %w", r.Name(), err)
	}
	go inf.RunWithContext(ctx)
	return reg, nil
}

// The selectors are kube-proxy v1.37's: a Service that names another
// service proxy is not ours, nor is a headless one (no cluster IP); a
// slice the EndpointSlice controller marks headless is not ours either.
// (v1.34 filtered both kinds on both labels.) The slices of a Service
// that is not ours are held, and programmed by nobody.
const (
	ServiceLabelSelector = "!service.kubernetes.io/service-proxy-name"
	ServiceFieldSelector = "spec.clusterIP!=None"
	SliceLabelSelector   = "!service.kubernetes.io/headless"
)

// ServiceHandler receives Service events, the Services read into what the
// proxier uses of them (desired.Service).
type ServiceHandler interface {
	OnServiceAdd(*desired.Service)
	OnServiceUpdate(old, cur *desired.Service)
	OnServiceDelete(*desired.Service)
	OnServicesSynced()
}

// EndpointSliceHandler receives EndpointSlice events, the slices read
// into what the proxier uses of them (desired.Slice).
type EndpointSliceHandler interface {
	OnEndpointSliceAdd(*desired.Slice)
	OnEndpointSliceUpdate(old, cur *desired.Slice)
	OnEndpointSliceDelete(*desired.Slice)
	OnEndpointSlicesSynced()
}

// NodeHandler receives events for this node's Node object.
type NodeHandler interface {
	OnNodeChange(*v1.Node) // nil when the Node is deleted
}

// ServiceCIDRHandler receives the cluster's Service CIDRs: every
// ServiceCIDR's spec.cidrs, after each change.
type ServiceCIDRHandler interface {
	OnServiceCIDRs(cidrs []string)
}

// Start runs the informers until ctx is done and calls the Synced handlers
// once each cache holds its first complete list. cidrs, if not nil, is
// given the ServiceCIDRs, which Services then wait for as for the Node.
func Start(ctx context.Context, client Client, nodeName string, resync time.Duration,
	svc ServiceHandler, eps EndpointSliceHandler, node NodeHandler, cidrs ServiceCIDRHandler) error {
	ours := func(o *metav1.ListOptions) {
		o.LabelSelector, o.FieldSelector = ServiceLabelSelector, ServiceFieldSelector
	}
	svcReg, err := inform(ctx, client, kubeclient.Services, "", ours, resync, serviceEvents(svc))
	if err != nil {
		return err
	}
	notHeadless := func(o *metav1.ListOptions) { o.LabelSelector = SliceLabelSelector }
	epsReg, err := inform(ctx, client, kubeclient.EndpointSlices, "", notHeadless, resync, sliceEvents(eps))
	if err != nil {
		return err
	}
	ownNode := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
	}
	nodeReg, err := inform(ctx, client, kubeclient.Nodes, "", ownNode, resync, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { with(o, node.OnNodeChange) },
		UpdateFunc: func(_, cur any) { with(cur, node.OnNodeChange) },
		DeleteFunc: func(any) { node.OnNodeChange(nil) },
	})
	if err != nil {
		return err
	}
	// The registrations, not the informers: an informer has synced once its
	// first list is in the cache, before our handlers have seen all of it,
	// and a first sync then would delete the real servers of every Service
	// whose slices are still on their way.
	// Services count as listed once this node's Node is too (one object,
	// listed at once): a first sync without its zone and primary address
	// would program topology hints and source ranges wrongly until the
	// next.
	svcSynced := []cache.InformerSynced{svcReg.HasSynced, nodeReg.HasSynced}
	if cidrs != nil {
		synced, err := informCIDRs(ctx, client, resync, cidrs)
		if err != nil {
			return err
		}
		svcSynced = append(svcSynced, synced)
	}
	go whenSynced(ctx, allSynced(svcSynced), svc.OnServicesSynced)
	go whenSynced(ctx, epsReg.HasSynced, eps.OnEndpointSlicesSynced)
	return nil
}

// informCIDRs watches the ServiceCIDRs (a few objects) and gives h their
// CIDRs, all of them, after each event.
func informCIDRs(ctx context.Context, client Client, resync time.Duration, h ServiceCIDRHandler) (cache.InformerSynced, error) {
	inf := cache.NewSharedIndexInformer(client.ListWatch(kubeclient.ServiceCIDRs, "", func(*metav1.ListOptions) {}),
		kubeclient.ServiceCIDRs.Object(), resync, cache.Indexers{})
	all := func() {
		var cidrs []string
		for _, o := range inf.GetStore().List() {
			if c, ok := o.(*networkingv1.ServiceCIDR); ok {
				cidrs = append(cidrs, c.Spec.CIDRs...)
			}
		}
		h.OnServiceCIDRs(cidrs)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { all() }, UpdateFunc: func(_, _ any) { all() }, DeleteFunc: func(any) { all() },
	})
	if err != nil {
		return nil, fmt.Errorf("servicecidrs handler: %w", err)
	}
	go inf.RunWithContext(ctx)
	return reg.HasSynced, nil
}

func serviceEvents(h ServiceHandler) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { with(o, h.OnServiceAdd) },
		UpdateFunc: func(old, cur any) { with2(old, cur, h.OnServiceUpdate) },
		DeleteFunc: func(o any) { with(o, h.OnServiceDelete) },
	}
}

func sliceEvents(h EndpointSliceHandler) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { with(o, h.OnEndpointSliceAdd) },
		UpdateFunc: func(old, cur any) { with2(old, cur, h.OnEndpointSliceUpdate) },
		DeleteFunc: func(o any) { with(o, h.OnEndpointSliceDelete) },
	}
}

// Slim is the informers' transform: the caches hold one object per
// Service and EndpointSlice in the cluster (at 50k Services they were over
// half the heap), so a Service is read into a desired.Service and a slice
// into a desired.Slice, each only what the proxier reads of it. Of other
// objects (the Node, ServiceCIDRs) it drops what nothing here reads:
// server-side apply's managed fields, owner references and kubectl's copy
// of the last applied object.
func Slim(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Service:
		return desired.ServiceOf(o), nil
	case *discovery.EndpointSlice:
		return desired.SliceOf(o), nil
	}
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
		m.SetOwnerReferences(nil)
		if a := m.GetAnnotations(); a != nil {
			delete(a, lastAppliedAnnotation)
		}
	}
	return obj, nil
}

const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// whenSynced calls fn once synced reports true. It polls every 10 ms, not
// cache.WaitForCacheSync's 100 ms: the first sync, and with it the critical
// Services, waits on this.
func whenSynced(ctx context.Context, synced func() bool, fn func()) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !synced() {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
	fn()
}

// with calls fn with obj as a T, unwrapping the tombstone a missed delete leaves.
func with[T any](obj any, fn func(T)) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if v, ok := obj.(T); ok {
		fn(v)
	}
}

func with2[T any](old, cur any, fn func(T, T)) {
	o, ok1 := old.(T)
	c, ok2 := cur.(T)
	if ok1 && ok2 {
		fn(o, c)
	}
}
