package desired

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

func TestAffinityTimeoutOutOfRangeIsReportedAndDefaulted(t *testing.T) {
	cfg := &Config{NodeName: "me", Scheduler: "rr"}
	for timeout, want := range map[int32]uint32{-1: 10800, 0: 10800, 86401: 10800, -2147483648: 10800, 1: 1, 86400: 86400} {
		s := testobj.Service("10.96.0.20", testobj.Port("", v1.ProtocolTCP, 80))
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}
		st, problems := Compute(ServiceOf(s), nil, cfg, Node{})
		if len(st.VirtualServers) != 1 || st.VirtualServers[0].Virtual.Timeout != want {
			t.Errorf("timeout %d programmed as\n%s\nwant timeout=%d", timeout, st.String(), want)
		}
		if reported := len(problems) > 0; reported != (want != uint32(timeout)) {
			t.Errorf("timeout %d: problems %q", timeout, problems)
		}
	}
}

// As upstream, a /0 source range lets any source in: the load balancer
// gets no firewall entries, which the kernel would refuse anyway
// (hash:ip,port,net takes no /0 net).
func TestZeroSourceRangeAllowsAll(t *testing.T) {
	s := testobj.Service("10.96.0.30", testobj.Port("", v1.ProtocolTCP, 80))
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "0.0.0.0/0", "fd00::/64"}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	st, problems := Compute(ServiceOf(s), nil, &Config{NodeName: "me", Scheduler: "rr"}, Node{})
	if r := st.String(); len(problems) > 0 || strings.Contains(r, "KUBE-LOAD-BALANCER-FW") || strings.Contains(r, "SOURCE") ||
		strings.Contains(r, "node blocked") || !strings.Contains(r, "KUBE-LOAD-BALANCER 198.51.100.7") {
		t.Fatalf("problems %q, state\n%s", problems, r)
	}
}

// Input the apiserver never passes but a hostile object may hold: a second
// cluster IP of one family, a second port of the same number and protocol.
// The first is programmed, the second reported.
func TestSecondsOfOneKindAreReported(t *testing.T) {
	s := testobj.Service("10.96.0.40", testobj.Port("a", v1.ProtocolTCP, 80), testobj.Port("b", v1.ProtocolTCP, 80), testobj.Port("c", v1.ProtocolUDP, 80))
	s.Spec.ClusterIPs = []string{"10.96.0.40", "::ffff:10.96.0.41"}
	sl := testobj.Slice("s-1", []discovery.EndpointPort{testobj.SlicePort("a", v1.ProtocolTCP, 8080), testobj.SlicePort("b", v1.ProtocolTCP, 9090)}, testobj.EP{IP: "10.244.0.1"})
	st, problems := Compute(ServiceOf(s), read(sl), &Config{NodeName: "me", Scheduler: "rr"}, Node{})
	r := st.String()
	if len(problems) != 2 || !strings.Contains(problems[0], "10.96.0.41") || !strings.Contains(problems[1], `port "b"`) {
		t.Errorf("problems %q", problems)
	}
	if strings.Contains(r, "10.96.0.41") || strings.Contains(r, ":9090") || !strings.Contains(r, "10.244.0.1:8080") || !strings.Contains(r, "80/UDP") {
		t.Errorf("state\n%s", r)
	}
}
