package desired

import (
	"testing"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// adjacent fails unless each non-empty string's bytes start where the
// previous one's end: one allocation, in order.
func adjacent(t *testing.T, what string, strs ...string) {
	t.Helper()
	var end unsafe.Pointer
	for i, s := range strs {
		if s == "" {
			continue
		}
		p := unsafe.Pointer(unsafe.StringData(s))
		if end != nil && p != end {
			t.Errorf("%s: %q (field %d) is not stored after the field before it", what, s, i)
		}
		end = unsafe.Add(p, len(s))
	}
}

// A cached object's strings are copied into one allocation (see pack),
// and the decoded object's are left as they were.
func TestReadObjectsKeepTheirStringsInOneAllocation(t *testing.T) {
	slice := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", ResourceVersion: "9",
			Labels: map[string]string{discovery.LabelServiceName: "web"}},
		Ports: []discovery.EndpointPort{{Name: ptr.To("http")}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.0.1"}, NodeName: ptr.To("n1")},
			{Addresses: []string{"10.244.0.2"}, NodeName: ptr.To("n1")},
			{Addresses: []string{"10.244.1.1"}, NodeName: ptr.To("n2")},
		},
	}
	decodedSlice := &discovery.EndpointSlice{}
	mustDecode(t, slice, decodedSlice)
	firstAddress := unsafe.StringData(decodedSlice.Endpoints[0].Addresses[0])
	s := SliceOf(decodedSlice)
	e := s.Endpoints
	adjacent(t, "slice's names", s.Namespace, s.Name, s.Service)
	adjacent(t, "slice", s.ResourceVersion, s.Ports[0].Name, e[0].Address, e[0].NodeName, e[1].Address, e[2].Address, e[2].NodeName)
	if s.Name != "web-1" || e[1].NodeName != "n1" || e[2].Address != "10.244.1.1" {
		t.Errorf("read %+v", s)
	}
	if unsafe.StringData(decodedSlice.Endpoints[0].Addresses[0]) != firstAddress {
		t.Error("the decoded slice was written to")
	}
	if unsafe.StringData(s.Name) == unsafe.StringData(decodedSlice.Name) || unsafe.StringData(e[0].Address) == firstAddress {
		t.Error("the slice keeps the decoder's strings")
	}

	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "7", UID: "u1",
			Annotations: map[string]string{SchedulerAnnotation: "lc"}},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1", "fd00::1"},
			Ports:       []v1.ServicePort{{Name: "http", Port: 80}},
			ExternalIPs: []string{"192.0.2.1"}, LoadBalancerSourceRanges: []string{"192.0.2.0/24"}},
		Status: v1.ServiceStatus{LoadBalancer: v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.9"}}}},
	}
	decodedSvc := &v1.Service{}
	mustDecode(t, svc, decodedSvc)
	lists := [][]string{decodedSvc.Spec.ClusterIPs, decodedSvc.Spec.ExternalIPs, decodedSvc.Spec.LoadBalancerSourceRanges}
	var before []*byte
	for _, l := range lists {
		before = append(before, unsafe.StringData(l[0]))
	}
	got := ServiceOf(decodedSvc)
	adjacent(t, "service's names", got.Namespace, got.Name, string(got.UID))
	adjacent(t, "service", got.ResourceVersion, got.ClusterIPs[0], got.ClusterIPs[1],
		got.ExternalIPs[0], got.LoadBalancerSourceRanges[0], got.Ports[0].Name, got.Ingress[0].IP, *got.Scheduler)
	if got.ClusterIPs[1] != "fd00::1" || *got.Scheduler != "lc" || got.Ingress[0].IP != "192.0.2.9" {
		t.Errorf("read %+v", got)
	}
	for i, l := range lists {
		if unsafe.StringData(l[0]) != before[i] {
			t.Errorf("the decoded Service's list %d was written to", i)
		}
	}
}

// mustDecode makes out as the informers decode in: from protobuf.
func mustDecode(t *testing.T, in, out interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}) {
	t.Helper()
	raw, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := out.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
}
