package framework

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Port is a Service port (port → targetPort).
func Port(name string, proto v1.Protocol, port, target int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(target)}
}

// ClusterIPService is a ClusterIP Service with a fixed address.
func ClusterIPService(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip}, Ports: ports},
	}
}

// SlicePort is an EndpointSlice port.
func SlicePort(name string, proto v1.Protocol, port int32) discovery.EndpointPort {
	return discovery.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(proto), Port: ptr.To(port)}
}

// Endpoint is an endpoint on node with the given readiness.
func Endpoint(ip, node string, ready bool) discovery.Endpoint {
	ep := discovery.Endpoint{Addresses: []string{ip}, Conditions: discovery.EndpointConditions{Ready: ptr.To(ready)}}
	if node != "" {
		ep.NodeName = ptr.To(node)
	}
	return ep
}

// Slice is an IPv4 EndpointSlice of Service svc.
func Slice(ns, svc, name string, ports []discovery.EndpointPort, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{discovery.LabelServiceName: svc, discovery.LabelManagedBy: "kip-e2e"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       ports,
		Endpoints:   eps,
	}
}

// CreateNamespace creates ns, tolerating one that exists.
func (e *Env) CreateNamespace(ns string) error {
	ctx, cancel := Ctx()
	defer cancel()
	_, err := e.Admin.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	return nil
}

// Apply creates Services and EndpointSlices, replacing those that exist; a
// Service's load-balancer ingress, if it has one, is written to its status.
func (e *Env) Apply(objs ...any) error {
	ctx, cancel := Ctx()
	defer cancel()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *v1.Service:
			err = createOrUpdate(ctx, e.Admin.CoreV1().Services(o.Namespace), o)
			if err == nil && len(o.Status.LoadBalancer.Ingress) > 0 {
				err = e.setIngress(ctx, o)
			}
		case *discovery.EndpointSlice:
			err = createOrUpdate(ctx, e.Admin.DiscoveryV1().EndpointSlices(o.Namespace), o)
		default:
			err = fmt.Errorf("unsupported %T", o)
		}
		if err != nil {
			return fmt.Errorf("apply: %w", err)
		}
	}
	return nil
}

// setIngress writes svc's load-balancer status, as a cloud controller would.
func (e *Env) setIngress(ctx context.Context, svc *v1.Service) error {
	c := e.Admin.CoreV1().Services(svc.Namespace)
	cur, err := c.Get(ctx, svc.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	cur.Status.LoadBalancer = svc.Status.LoadBalancer
	if _, err := c.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("%s/%s status: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// objectClient is the part of a typed client Apply uses.
type objectClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// createOrUpdate creates o, or replaces the stored object of its name.
func createOrUpdate[T metav1.Object](ctx context.Context, c objectClient[T], o T) error {
	cur, err := c.Get(ctx, o.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Create(ctx, o, metav1.CreateOptions{})
	} else if err == nil {
		o.SetResourceVersion(cur.GetResourceVersion())
		_, err = c.Update(ctx, o, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("%s/%s: %w", o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

// DeleteService deletes a Service and its slices.
func (e *Env) DeleteService(ns, name string) error {
	ctx, cancel := Ctx()
	defer cancel()
	if err := e.Admin.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return e.Admin.DiscoveryV1().EndpointSlices(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + name})
}

// Events lists the events in ns as "regarding-name reason note", one each.
func (e *Env) Events(ns string) ([]string, error) {
	ctx, cancel := Ctx()
	defer cancel()
	list, err := e.Admin.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Regarding.Name+" "+ev.Reason+" "+ev.Note)
	}
	return out, nil
}
