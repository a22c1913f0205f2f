// Package kubeclient talks to the apiserver about the three API groups the
// proxier uses, core/v1 (Services, Nodes), discovery.k8s.io/v1
// (EndpointSlices) and events.k8s.io/v1 (Events), over REST clients with a
// scheme of those groups only.
//
// Why not client-go's clientset: its typed clients register every API group
// of Kubernetes in one scheme, and urfave/cli's help templates make the
// linker keep every exported method of every type it can reach. Together
// they doubled the binary (62 MB against 27 MB), and the image with it.
package kubeclient

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Scheme knows the types of the three groups, and the list options.
var Scheme = runtime.NewScheme()

var (
	codecs         = serializer.NewCodecFactory(Scheme)
	parameterCodec = runtime.NewParameterCodec(Scheme)
)

func init() {
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(v1.AddToScheme(Scheme))
	utilruntime.Must(discovery.AddToScheme(Scheme))
	utilruntime.Must(eventsv1.AddToScheme(Scheme))
	utilruntime.Must(networkingv1.AddToScheme(Scheme))
}

// Resource is a kind of object the informers list and watch.
type Resource struct {
	group         schema.GroupVersion
	name          string
	object        func() runtime.Object // an empty object of the kind
	list          func() runtime.Object // an empty list of the kind
	clusterScoped bool                  // not in a namespace
}

// The resources the informers watch.
var (
	Services = Resource{group: v1.SchemeGroupVersion, name: "services",
		object: func() runtime.Object { return &v1.Service{} }, list: func() runtime.Object { return &v1.ServiceList{} }}
	EndpointSlices = Resource{group: discovery.SchemeGroupVersion, name: "endpointslices",
		object: func() runtime.Object { return &discovery.EndpointSlice{} }, list: func() runtime.Object { return &discovery.EndpointSliceList{} }}
	Nodes = Resource{group: v1.SchemeGroupVersion, name: "nodes", clusterScoped: true,
		object: func() runtime.Object { return &v1.Node{} }, list: func() runtime.Object { return &v1.NodeList{} }}
	// ServiceCIDRs are the ranges cluster IPs are allocated from, watched
	// only with --ipvs-vip-mode=local-route.
	ServiceCIDRs = Resource{group: networkingv1.SchemeGroupVersion, name: "servicecidrs", clusterScoped: true,
		object: func() runtime.Object { return &networkingv1.ServiceCIDR{} }, list: func() runtime.Object { return &networkingv1.ServiceCIDRList{} }}
)

// Object is an empty object of r's kind, for an informer's type.
func (r Resource) Object() runtime.Object { return r.object() }

// Name is r's plural resource name ("services").
func (r Resource) Name() string { return r.name }

// Client is the apiserver for the proxier: list and watch, and Events.
type Client struct {
	byGroup map[schema.GroupVersion]*rest.RESTClient
}

// New builds the REST clients of the three groups from rc (its content
// type, rate limits and transport wrappers included).
func New(rc *rest.Config) (*Client, error) {
	c := &Client{byGroup: map[schema.GroupVersion]*rest.RESTClient{}}
	for _, gv := range []schema.GroupVersion{v1.SchemeGroupVersion, discovery.SchemeGroupVersion, eventsv1.SchemeGroupVersion, networkingv1.SchemeGroupVersion} {
		cfg := rest.CopyConfig(rc)
		cfg.GroupVersion = &gv
		cfg.APIPath = "/apis"
		if gv.Group == "" {
			cfg.APIPath = "/api"
		}
		cfg.NegotiatedSerializer = serializer.WithoutConversionCodecFactory{CodecFactory: codecs}
		if cfg.UserAgent == "" {
			cfg.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		group, err := rest.RESTClientFor(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s client: %w", gv, err)
		}
		c.byGroup[gv] = group
	}
	return c, nil
}

// Reachable asks the apiserver for its version: nil once it answers at
// all (an HTTP error is an answer), else why it could not be reached, for
// a command-line tool that must fail fast instead of retrying.
func (c *Client) Reachable(ctx context.Context) error {
	err := c.byGroup[v1.SchemeGroupVersion].Get().AbsPath("/version").Do(ctx).Error()
	var status apierrors.APIStatus
	if err == nil || errors.As(err, &status) {
		return nil
	}
	return err
}

// ListWatch lists and watches r in namespace (all when ""), with tweak
// setting the selectors of every list and watch.
func (c *Client) ListWatch(r Resource, namespace string, tweak func(*metav1.ListOptions)) cache.ListerWatcher {
	req := func(opts *metav1.ListOptions) *rest.Request {
		tweak(opts)
		return c.byGroup[r.group].Get().NamespaceIfScoped(namespace, !r.clusterScoped).Resource(r.name).
			VersionedParams(opts, parameterCodec)
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			out := r.list()
			return out, req(&opts).Do(ctx).Into(out)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return req(&opts).Watch(ctx)
		},
	}
}

// CreateEvent posts ev.
func (c *Client) CreateEvent(ctx context.Context, ev *eventsv1.Event) error {
	return c.byGroup[eventsv1.SchemeGroupVersion].Post().Namespace(ev.Namespace).Resource("events").
		Body(ev).Do(ctx).Error()
}
