// Package testobj builds the API objects unit tests feed the proxier: a
// Service in namespace "ns" named "s", its ports, and EndpointSlices of it.
package testobj

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// Name is ns/n.
func Name(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }

// Service is a ClusterIP Service ns/s on ip.
func Service(ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeClusterIP, ClusterIP: ip, Ports: ports}}
}

// Port is a Service port.
func Port(name string, proto v1.Protocol, p int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Protocol: proto, Port: p}
}

// EP is an endpoint of a Slice; nil conditions are left unset.
type EP struct {
	IP                          string
	Ready, Serving, Terminating *bool
	Node                        string
	Zones, Nodes                []string // topology hints
}

// Slice is an IPv4 EndpointSlice of ns/s.
func Slice(name string, ports []discovery.EndpointPort, eps ...EP) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
		Labels: map[string]string{discovery.LabelServiceName: "s"}}, AddressType: discovery.AddressTypeIPv4, Ports: ports}
	for _, e := range eps {
		d := discovery.Endpoint{Addresses: []string{e.IP}, Conditions: discovery.EndpointConditions{Ready: e.Ready, Serving: e.Serving, Terminating: e.Terminating}}
		if e.Node != "" {
			d.NodeName = ptr.To(e.Node)
		}
		if len(e.Zones)+len(e.Nodes) > 0 {
			d.Hints = &discovery.EndpointHints{}
			for _, z := range e.Zones {
				d.Hints.ForZones = append(d.Hints.ForZones, discovery.ForZone{Name: z})
			}
			for _, n := range e.Nodes {
				d.Hints.ForNodes = append(d.Hints.ForNodes, discovery.ForNode{Name: n})
			}
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	return s
}

// SlicePort is an EndpointSlice port.
func SlicePort(name string, proto v1.Protocol, p int32) discovery.EndpointPort {
	return discovery.EndpointPort{Name: ptr.To(name), Protocol: ptr.To(proto), Port: ptr.To(p)}
}

// Yes and No are condition values.
var Yes, No = ptr.To(true), ptr.To(false)
