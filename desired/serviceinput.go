package desired

import (
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Service is what the proxier reads of a Service. The informers' cache
// holds it in place of the API object (at 50k Services the decoded
// objects were a sixth of the heap, most of it fields nothing here reads).
// Values are kept as the API gave them, unparsed: Compute parses them and
// reports what it skips, so a hostile value is judged in one place.
type Service struct {
	Namespace, Name string
	// ResourceVersion is kept for the informer, which tells an update
	// from a resync by it.
	ResourceVersion string
	// UID and Created decide which of two Services claiming one virtual
	// server gets it, and name the Service in Events.
	UID     types.UID
	Created time.Time

	Type       v1.ServiceType
	ClusterIP  string
	ClusterIPs []string
	Ports      []ServicePort
	// ExternalIPs, LoadBalancerSourceRanges and Ingress (the status's
	// load-balancer ingress points) as listed.
	ExternalIPs              []string
	LoadBalancerSourceRanges []string
	Ingress                  []Ingress
	SessionAffinity          v1.ServiceAffinity
	// StickySeconds is sessionAffinityConfig.clientIP.timeoutSeconds, nil
	// if unset.
	StickySeconds         *int32
	ExternalTrafficPolicy v1.ServiceExternalTrafficPolicy
	// InternalTrafficPolicy is "" if unset.
	InternalTrafficPolicy v1.ServiceInternalTrafficPolicy
	HealthCheckNodePort   int32
	// Scheduler is the SchedulerAnnotation's value, nil without one.
	Scheduler *string
}

// ServicePort is one of a Service's ports.
type ServicePort struct {
	Name           string
	Protocol       v1.Protocol
	Port, NodePort int32
}

// Ingress is a load-balancer ingress point: its IP ("" for one with a
// hostname only) and ipMode (nil if unset).
type Ingress struct {
	IP     string
	IPMode *v1.LoadBalancerIPMode
}

// ServiceOf reads s (nil: nil). Enumerated values are the API's
// constants, not a copy each.
func ServiceOf(s *v1.Service) *Service {
	if s == nil {
		return nil
	}
	sp := &s.Spec
	out := &Service{
		Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion,
		UID: s.UID, Created: s.CreationTimestamp.Time,
		Type:      constant(sp.Type, v1.ServiceTypeClusterIP, v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer, v1.ServiceTypeExternalName),
		ClusterIP: sp.ClusterIP, ClusterIPs: sp.ClusterIPs,
		ExternalIPs: sp.ExternalIPs, LoadBalancerSourceRanges: sp.LoadBalancerSourceRanges,
		SessionAffinity:       constant(sp.SessionAffinity, v1.ServiceAffinityNone, v1.ServiceAffinityClientIP),
		ExternalTrafficPolicy: constant(sp.ExternalTrafficPolicy, v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal),
		HealthCheckNodePort:   sp.HealthCheckNodePort,
	}
	if p := sp.InternalTrafficPolicy; p != nil {
		out.InternalTrafficPolicy = constant(*p, v1.ServiceInternalTrafficPolicyCluster, v1.ServiceInternalTrafficPolicyLocal)
	}
	if c := sp.SessionAffinityConfig; c != nil && c.ClientIP != nil {
		out.StickySeconds = c.ClientIP.TimeoutSeconds
	}
	if v, ok := s.Annotations[SchedulerAnnotation]; ok {
		out.Scheduler = &v
	}
	if len(sp.Ports) > 0 {
		out.Ports = make([]ServicePort, len(sp.Ports))
	}
	for i, p := range sp.Ports {
		out.Ports[i] = ServicePort{Name: p.Name, Protocol: protocol(p.Protocol), Port: p.Port, NodePort: p.NodePort}
	}
	if in := s.Status.LoadBalancer.Ingress; len(in) > 0 {
		out.Ingress = make([]Ingress, len(in))
		for i, ing := range in {
			out.Ingress[i].IP = ing.IP
			out.Ingress[i].IPMode = ipMode(ing.IPMode)
		}
	}
	packService(out)
	return out
}

// SameSpec says whether s and o program the same: everything but their
// names, resource versions, UIDs and creation times is equal.
func (s *Service) SameSpec(o *Service) bool {
	return s.Type == o.Type && s.ClusterIP == o.ClusterIP && slices.Equal(s.ClusterIPs, o.ClusterIPs) &&
		slices.Equal(s.Ports, o.Ports) && slices.Equal(s.ExternalIPs, o.ExternalIPs) &&
		slices.Equal(s.LoadBalancerSourceRanges, o.LoadBalancerSourceRanges) && slices.EqualFunc(s.Ingress, o.Ingress, Ingress.equal) &&
		s.SessionAffinity == o.SessionAffinity && equalPtr(s.StickySeconds, o.StickySeconds) &&
		s.ExternalTrafficPolicy == o.ExternalTrafficPolicy && s.InternalTrafficPolicy == o.InternalTrafficPolicy &&
		s.HealthCheckNodePort == o.HealthCheckNodePort && equalPtr(s.Scheduler, o.Scheduler)
}

func (i Ingress) equal(o Ingress) bool { return i.IP == o.IP && equalPtr(i.IPMode, o.IPMode) }

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// GetObjectMeta names the Service for the informer's cache, which keys its
// objects by namespace and name and tells updates by resource version.
func (s *Service) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion}
}

// Reference names the Service in an Event.
func (s *Service) Reference() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Service", APIVersion: "v1", Namespace: s.Namespace, Name: s.Name,
		UID: s.UID, ResourceVersion: s.ResourceVersion}
}

// The ipModes ingress points share. Nothing writes through them.
var ipModeVIP, ipModeProxy = v1.LoadBalancerIPModeVIP, v1.LoadBalancerIPModeProxy

// ipMode points at the shared value equal to *m, or at a copy of another.
func ipMode(m *v1.LoadBalancerIPMode) *v1.LoadBalancerIPMode {
	switch {
	case m == nil:
		return nil
	case *m == ipModeVIP:
		return &ipModeVIP
	case *m == ipModeProxy:
		return &ipModeProxy
	}
	other := *m
	return &other
}

// constant returns the known value equal to s, or s.
func constant[S ~string](s S, known ...S) S {
	for _, k := range known {
		if s == k {
			return k
		}
	}
	return s
}
