// Package clientset serves the informers from a client-go clientset, such
// as the fake one of unit tests and of the bench's fake mode. The proxier
// itself uses kubeclient, whose scheme holds only the groups it reads.
package clientset

import (
	"context"
	"fmt"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeclient"
)

// Client is a clientset as the informers' and the Event poster's client.
type Client struct{ kubernetes.Interface }

// ListWatch lists and watches r through the clientset's typed client.
func (c Client) ListWatch(r kubeclient.Resource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	var list func(context.Context, metav1.ListOptions) (runtime.Object, error)
	var watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)
	switch r.Name() {
	case kubeclient.Services.Name():
		s := c.CoreV1().Services(namespace)
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return s.List(ctx, o) }
		watchFn = s.Watch
	case kubeclient.EndpointSlices.Name():
		s := c.DiscoveryV1().EndpointSlices(namespace)
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return s.List(ctx, o) }
		watchFn = s.Watch
	case kubeclient.Nodes.Name():
		s := c.CoreV1().Nodes()
		list = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return s.List(ctx, o) }
		watchFn = s.Watch
	default:
		panic(fmt.Sprintf("clientset: no typed client for %s", r.Name()))
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			tweak(&o)
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			tweak(&o)
			return watchFn(ctx, o)
		},
	}
	// A fake clientset cannot stream a watch's initial list.
	return cache.ToListWatcherWithWatchListSemantics(lw, c.Interface)
}

// CreateEvent posts ev.
func (c Client) CreateEvent(ctx context.Context, ev *eventsv1.Event) error {
	_, err := c.EventsV1().Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}
