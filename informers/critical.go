package informers

import (
	"context"
	"fmt"
	"time"

	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// StartCritical lists and watches just the named Services and their
// EndpointSlices, a small informer pair each, and hands their events to
// their own handlers: the cluster-wide list takes seconds to minutes at
// scale, and node agents wait on the apiserver's and DNS's Services
// meanwhile. The Synced handlers are called once every pair holds its first
// list. The informers stop when stop is closed (or ctx is done); the caller
// closes it once the cluster-wide caches have synced, so the two never
// disagree for long.
func StartCritical(ctx context.Context, client kubernetes.Interface, names []types.NamespacedName, resync time.Duration,
	svc ServiceHandler, eps EndpointSliceHandler, stop <-chan struct{}) error {
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	var svcSynced, epsSynced []cache.InformerSynced
	for _, n := range names {
		byName := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(Slim),
			informers.WithNamespace(n.Namespace), informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.LabelSelector = LabelSelector
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", n.Name).String()
			}))
		byService := informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(Slim),
			informers.WithNamespace(n.Namespace), informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.LabelSelector = discovery.LabelServiceName + "=" + n.Name + "," + LabelSelector
			}))
		svcReg, err := byName.Core().V1().Services().Informer().AddEventHandler(serviceEvents(svc))
		if err != nil {
			cancel()
			return fmt.Errorf("critical service %s handler: %w", n, err)
		}
		epsReg, err := byService.Discovery().V1().EndpointSlices().Informer().AddEventHandler(sliceEvents(eps))
		if err != nil {
			cancel()
			return fmt.Errorf("critical service %s endpointslice handler: %w", n, err)
		}
		svcSynced = append(svcSynced, svcReg.HasSynced)
		epsSynced = append(epsSynced, epsReg.HasSynced)
		byName.Start(ctx.Done())
		byService.Start(ctx.Done())
	}
	go whenSynced(ctx, allSynced(svcSynced), svc.OnServicesSynced)
	go whenSynced(ctx, allSynced(epsSynced), eps.OnEndpointSlicesSynced)
	return nil
}

func allSynced(fns []cache.InformerSynced) func() bool {
	return func() bool {
		for _, f := range fns {
			if !f() {
				return false
			}
		}
		return true
	}
}
