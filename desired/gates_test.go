package desired

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

// TestExternalIPsOffByGate: with AllowServiceExternalIPs off, a Service's
// external IPs are not programmed (no virtual server, address or set
// entry), as kube-proxy v1.37; its cluster IP is, as before.
func TestExternalIPsOffByGate(t *testing.T) {
	tcp := v1.ProtocolTCP
	svc := testobj.Service("10.96.0.83", testobj.Port("", tcp, 80))
	svc.Spec.ExternalIPs = []string{"192.0.2.83"}
	slices := []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)}, testobj.EP{IP: "10.244.0.1"})}
	for ignore, want := range map[bool]bool{false: true, true: false} {
		st, problems := Compute(ServiceOf(svc), read(slices...), &Config{NodeName: "me", IgnoreExternalIPs: ignore}, Node{})
		if len(problems) > 0 {
			t.Fatalf("problems %v", problems)
		}
		got := st.String()
		if strings.Contains(got, "192.0.2.83") != want || !strings.Contains(got, "vs 10.96.0.83:80/TCP") {
			t.Errorf("external IPs ignored %v: want the external IP programmed %v:\n%s", ignore, want, got)
		}
	}
	if len(svc.Spec.ExternalIPs) != 1 {
		t.Error("Compute changed the Service it was given")
	}
}
