package desired

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Slice is what the proxier reads of an EndpointSlice. The informers'
// cache holds it in place of the API object: one per slice in the
// cluster, it is a third of the object's size (at 50k Services the
// decoded slices were over a third of the heap). Its optional fields are
// resolved as the API documents them, so it is plain data to compare.
type Slice struct {
	Namespace, Name string
	// ResourceVersion is kept for the informer, which tells an update
	// from a resync by it.
	ResourceVersion string
	// Service is the kubernetes.io/service-name label: "" if none.
	Service     string
	AddressType discovery.AddressType
	// TriggerTime is the endpoints controller's last-change-trigger-time,
	// which network programming latency is measured from; zero if unset
	// or not a time.
	TriggerTime time.Time
	Ports       []SlicePort
	Endpoints   []SliceEndpoint
}

// SlicePort is a slice's port: an unnamed port's Name is "", an unset
// protocol is TCP and an unset port 0 (invalid, like any outside 1-65535).
type SlicePort struct {
	Name     string
	Protocol v1.Protocol
	Port     int32
}

// SliceEndpoint is one endpoint. Address is the first of its addresses,
// the one consumers use, "" if it has none; NodeName is "" if unset. An
// unset ready or serving condition is true, an unset terminating one
// false, as the API documents.
type SliceEndpoint struct {
	Address, NodeName           string
	Ready, Serving, Terminating bool
	Hints                       *SliceHints // nil without hints
}

// SliceHints are an endpoint's topology hints: the zones and nodes it is
// meant for.
type SliceHints struct {
	Zones, Nodes []string
}

// SliceOf reads s. Strings that repeat across a slice's endpoints and
// ports (node names, protocols) are shared, not copied (see packSlice).
func SliceOf(s *discovery.EndpointSlice) *Slice {
	out := &Slice{
		Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion,
		Service: s.Labels[discovery.LabelServiceName], AddressType: addressType(s.AddressType),
	}
	if t, err := time.Parse(time.RFC3339Nano, s.Annotations[v1.EndpointsLastChangeTriggerTime]); err == nil {
		out.TriggerTime = t
	}
	if len(s.Ports) > 0 {
		out.Ports = make([]SlicePort, len(s.Ports))
	}
	for i, p := range s.Ports {
		sp := &out.Ports[i]
		if p.Name != nil {
			sp.Name = *p.Name
		}
		sp.Protocol = v1.ProtocolTCP
		if p.Protocol != nil {
			sp.Protocol = protocol(*p.Protocol)
		}
		if p.Port != nil {
			sp.Port = *p.Port
		}
	}
	if len(s.Endpoints) > 0 {
		out.Endpoints = make([]SliceEndpoint, len(s.Endpoints))
	}
	for i := range s.Endpoints {
		e, se := &s.Endpoints[i], &out.Endpoints[i]
		if len(e.Addresses) > 0 {
			se.Address = e.Addresses[0]
		}
		if e.NodeName != nil {
			se.NodeName = *e.NodeName
		}
		c := e.Conditions
		se.Ready = c.Ready == nil || *c.Ready
		se.Serving = c.Serving == nil || *c.Serving
		se.Terminating = c.Terminating != nil && *c.Terminating
		if h := e.Hints; h != nil && (len(h.ForZones) > 0 || len(h.ForNodes) > 0) {
			se.Hints = &SliceHints{}
			for _, z := range h.ForZones {
				se.Hints.Zones = append(se.Hints.Zones, z.Name)
			}
			for _, n := range h.ForNodes {
				se.Hints.Nodes = append(se.Hints.Nodes, n.Name)
			}
		}
	}
	packSlice(out)
	return out
}

// SameEndpoints says whether s and o program the same: their address
// type, ports and endpoints are equal.
func (s *Slice) SameEndpoints(o *Slice) bool {
	return s.AddressType == o.AddressType && slices.Equal(s.Ports, o.Ports) &&
		slices.EqualFunc(s.Endpoints, o.Endpoints, func(a, b SliceEndpoint) bool {
			return a.Address == b.Address && a.NodeName == b.NodeName && a.Ready == b.Ready &&
				a.Serving == b.Serving && a.Terminating == b.Terminating && a.Hints.equal(b.Hints)
		})
}

func (h *SliceHints) equal(o *SliceHints) bool {
	if h == nil || o == nil {
		return h == o
	}
	return slices.Equal(h.Zones, o.Zones) && slices.Equal(h.Nodes, o.Nodes)
}

// GetObjectMeta names the slice for the informer's cache, which keys its
// objects by namespace and name and tells updates by resource version.
func (s *Slice) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion}
}

// addressType and protocol return the API's constant for a known value,
// so that 50k slices do not each hold a copy of "IPv4" and "TCP".
func addressType(t discovery.AddressType) discovery.AddressType {
	return constant(t, discovery.AddressTypeIPv4, discovery.AddressTypeIPv6, discovery.AddressTypeFQDN)
}

func protocol(p v1.Protocol) v1.Protocol {
	return constant(p, v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP)
}
