package desired

import (
	"testing"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeclient"
)

// SameSpec tells apart every field that programs the kernel, and ignores
// the names, versions and times that do not.
func TestServiceSameSpec(t *testing.T) {
	base := func() *Service {
		return &Service{Namespace: "ns", Name: "web", ResourceVersion: "1", UID: "u1",
			Type: v1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
			Ports:       []ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
			ExternalIPs: []string{"192.0.2.1"}, LoadBalancerSourceRanges: []string{"192.0.2.0/24"},
			Ingress:         []Ingress{{IP: "192.0.2.9"}},
			SessionAffinity: v1.ServiceAffinityClientIP, StickySeconds: ptr.To[int32](60),
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal, InternalTrafficPolicy: v1.ServiceInternalTrafficPolicyCluster,
			HealthCheckNodePort: 31000, Scheduler: ptr.To("lc")}
	}
	for name, edit := range map[string]func(*Service){
		"type":             func(s *Service) { s.Type = v1.ServiceTypeNodePort },
		"cluster IP":       func(s *Service) { s.ClusterIP = "10.96.0.2" },
		"cluster IPs":      func(s *Service) { s.ClusterIPs = append(s.ClusterIPs, "fd00::1") },
		"port":             func(s *Service) { s.Ports[0].Port = 81 },
		"port name":        func(s *Service) { s.Ports[0].Name = "web" },
		"protocol":         func(s *Service) { s.Ports[0].Protocol = v1.ProtocolUDP },
		"node port":        func(s *Service) { s.Ports[0].NodePort = 30081 },
		"external IPs":     func(s *Service) { s.ExternalIPs = nil },
		"source ranges":    func(s *Service) { s.LoadBalancerSourceRanges[0] = "192.0.3.0/24" },
		"ingress IP":       func(s *Service) { s.Ingress[0].IP = "192.0.2.8" },
		"ingress mode":     func(s *Service) { s.Ingress[0].IPMode = ptr.To(v1.LoadBalancerIPModeProxy) },
		"ingress mode set": func(s *Service) { s.Ingress[0].IPMode = ptr.To(v1.LoadBalancerIPMode("")) },
		"affinity":         func(s *Service) { s.SessionAffinity = v1.ServiceAffinityNone },
		"sticky timeout":   func(s *Service) { s.StickySeconds = ptr.To[int32](61) },
		"no timeout":       func(s *Service) { s.StickySeconds = nil },
		"external policy":  func(s *Service) { s.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster },
		"internal policy":  func(s *Service) { s.InternalTrafficPolicy = v1.ServiceInternalTrafficPolicyLocal },
		"health check":     func(s *Service) { s.HealthCheckNodePort = 31001 },
		"scheduler":        func(s *Service) { s.Scheduler = ptr.To("rr") },
		"no scheduler":     func(s *Service) { s.Scheduler = nil },
		"a second port":    func(s *Service) { s.Ports = append(s.Ports, ServicePort{Port: 443}) },
		"a second ingress": func(s *Service) { s.Ingress = append(s.Ingress, Ingress{}) },
	} {
		changed := base()
		edit(changed)
		if base().SameSpec(changed) || changed.SameSpec(base()) {
			t.Errorf("a changed %s counts as the same", name)
		}
	}
	other := base()
	other.Name, other.ResourceVersion, other.UID, other.Created = "x", "2", "u2", time.Now()
	other.StickySeconds, other.Scheduler = ptr.To[int32](60), ptr.To("lc") // equal values, other pointers
	other.Ingress = []Ingress{{IP: "192.0.2.9"}}
	if !base().SameSpec(other) {
		t.Error("a Service that programs the same counts as changed")
	}
}

// A Service is read as the API gave it, its optional fields as unset, and
// names itself in Events as the API object would.
func TestServiceOf(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC))
	in := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "7", UID: types.UID("u1"),
			CreationTimestamp: created, Annotations: map[string]string{SchedulerAnnotation: "lc", "team": "a"}},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1", "fd00::1"},
			Ports:       []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
			ExternalIPs: []string{"192.0.2.1"}, LoadBalancerSourceRanges: []string{"192.0.2.0/24"},
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: 31000,
			InternalTrafficPolicy: ptr.To(v1.ServiceInternalTrafficPolicyLocal),
			SessionAffinity:       v1.ServiceAffinityClientIP,
			SessionAffinityConfig: &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{
			{IP: "192.0.2.9", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)}, {Hostname: "lb.example"},
			{IP: "192.0.2.10", IPMode: ptr.To(v1.LoadBalancerIPMode(""))}}}},
	}
	got := ServiceOf(in)
	want := &Service{Type: v1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1", "fd00::1"},
		Ports:       []ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080}},
		ExternalIPs: []string{"192.0.2.1"}, LoadBalancerSourceRanges: []string{"192.0.2.0/24"},
		Ingress: []Ingress{{IP: "192.0.2.9", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)}, {},
			{IP: "192.0.2.10", IPMode: ptr.To(v1.LoadBalancerIPMode(""))}},
		ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: 31000,
		InternalTrafficPolicy: v1.ServiceInternalTrafficPolicyLocal,
		SessionAffinity:       v1.ServiceAffinityClientIP, StickySeconds: ptr.To[int32](60), Scheduler: ptr.To("lc")}
	if !got.SameSpec(want) || got.Namespace != "ns" || got.Name != "web" || got.ResourceVersion != "7" || got.UID != "u1" ||
		!got.Created.Equal(created.Time) {
		t.Fatalf("read\n%+v\nwant\n%+v", got, want)
	}
	if bare := ServiceOf(&v1.Service{}); bare.Scheduler != nil || bare.StickySeconds != nil || bare.InternalTrafficPolicy != "" {
		t.Errorf("a bare Service read with fields set: %+v", bare)
	}
	if unsafe.StringData(got.ClusterIPs[0]) != unsafe.StringData(got.ClusterIP) {
		t.Error("the first cluster IP is a second copy of clusterIP")
	}

	apiRef, err := reference.GetReference(kubeclient.Scheme, in)
	if err != nil {
		t.Fatal(err)
	}
	if ref := got.Reference(); *ref != *apiRef {
		t.Errorf("refers to itself as %+v; the API object as %+v", ref, apiRef)
	}
}
