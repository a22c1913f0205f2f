package informers

import (
	"context"
	"fmt"
	"time"

	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeclient"
)

// StartCritical lists and watches just the named Services and their
// EndpointSlices, a small informer pair each, and hands their events to
// their own handlers: the cluster-wide list takes seconds to minutes at
// scale, and node agents wait on the apiserver's and DNS's Services
// meanwhile. The Synced handlers are called once every pair holds its first
// list. The informers stop when stop is closed (or ctx is done); the caller
// closes it once the cluster-wide caches have synced, so the two never
// disagree for long.
func StartCritical(ctx context.Context, client Client, names []types.NamespacedName, resync time.Duration,
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
		byName := func(o *metav1.ListOptions) {
			o.LabelSelector = ServiceLabelSelector
			o.FieldSelector = fields.AndSelectors(fields.OneTermEqualSelector("metadata.name", n.Name),
				fields.ParseSelectorOrDie(ServiceFieldSelector)).String()
		}
		byService := func(o *metav1.ListOptions) {
			o.LabelSelector = discovery.LabelServiceName + "=" + n.Name + "," + SliceLabelSelector
		}
		svcReg, err := inform(ctx, client, kubeclient.Services, n.Namespace, byName, resync, serviceEvents(svc))
		if err != nil {
			cancel()
			return fmt.Errorf("critical service %s: %w", n, err)
		}
		epsReg, err := inform(ctx, client, kubeclient.EndpointSlices, n.Namespace, byService, resync, sliceEvents(eps))
		if err != nil {
			cancel()
			return fmt.Errorf("critical service %s: %w", n, err)
		}
		svcSynced = append(svcSynced, svcReg.HasSynced)
		epsSynced = append(epsSynced, epsReg.HasSynced)
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
