package desired

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

func slice6(name string, ports []discovery.EndpointPort, eps ...testobj.EP) *discovery.EndpointSlice {
	s := testobj.Slice(name, ports, eps...)
	s.AddressType = discovery.AddressTypeIPv6
	return s
}

// TestDesiredStateDualStack: a Service is programmed in each family it has
// a cluster IP of, each with its own family's endpoints, node addresses,
// external IPs, source ranges and sets.
func TestDesiredStateDualStack(t *testing.T) {
	cfg := &Config{NodeName: "me", Scheduler: "rr", IPv6Capable: true}
	tcp := v1.ProtocolTCP
	node4, node6 := netip.MustParseAddr("10.0.2.15"), netip.MustParseAddr("fd00:2::15")
	node := Node{All: []netip.Addr{node4, node6}, NodePort: []netip.Addr{node4, node6}, Primary: [2]netip.Addr{node4, node6}}
	ports := []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)}
	slices := []*discovery.EndpointSlice{
		testobj.Slice("s-v4", ports, testobj.EP{IP: "10.244.0.5", Node: "me"}),
		slice6("s-v6", ports, testobj.EP{IP: "fd00:244::5", Node: "me"}, testobj.EP{IP: "10.244.0.6"}),
	}
	lb := testobj.Service("10.96.0.10", v1.ServicePort{Protocol: tcp, Port: 80, NodePort: 30080})
	lb.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
	lb.Spec.Type = v1.ServiceTypeLoadBalancer
	lb.Spec.ExternalIPs = []string{"203.0.113.7", "2001:db8::7"}
	lb.Spec.LoadBalancerSourceRanges = []string{"2001:db8:1::/48"}
	lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "2001:db8::9"}}

	st, problems := Compute(ServiceOf(lb), read(slices...), cfg, node)
	want := `vs 10.96.0.10:80/TCP rr
  rs 10.244.0.5:8080 w=1
vs 203.0.113.7:80/TCP rr
  rs 10.244.0.5:8080 w=1
vs 10.0.2.15:30080/TCP rr
  rs 10.244.0.5:8080 w=1
vs [fd00:96::10]:80/TCP rr
  rs [fd00:244::5]:8080 w=1
vs [2001:db8::7]:80/TCP rr
  rs [fd00:244::5]:8080 w=1
vs [2001:db8::9]:80/TCP rr
  rs [fd00:244::5]:8080 w=1
vs [fd00:2::15]:30080/TCP rr
  rs [fd00:244::5]:8080 w=1
addr 10.96.0.10
addr 203.0.113.7
addr fd00:96::10
addr 2001:db8::7
addr 2001:db8::9
set KUBE-6-CLUSTER-IP fd00:96::10,tcp:80
set KUBE-6-EXTERNAL-IP 2001:db8::7,tcp:80
set KUBE-6-IPVS-IPS 2001:db8::7
set KUBE-6-IPVS-IPS 2001:db8::9
set KUBE-6-IPVS-IPS fd00:96::10
set KUBE-6-LOAD-BALANCER 2001:db8::9,tcp:80
set KUBE-6-LOAD-BALANCER-FW 2001:db8::9,tcp:80
set KUBE-6-LOAD-BALANCER-SOURCE-CID 2001:db8::9,tcp:80,2001:db8:1::/48
set KUBE-6-LOOP-BACK fd00:244::5,tcp:8080,fd00:244::5
set KUBE-6-NODE-PORT-TCP 30080
set KUBE-CLUSTER-IP 10.96.0.10,tcp:80
set KUBE-EXTERNAL-IP 203.0.113.7,tcp:80
set KUBE-IPVS-IPS 10.96.0.10
set KUBE-IPVS-IPS 203.0.113.7
set KUBE-LOOP-BACK 10.244.0.5,tcp:8080,10.244.0.5
set KUBE-NODE-PORT-TCP 30080
node blocked from 2001:db8::9,tcp:80`
	if got := st.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// The IPv4 address in the IPv6 slice.
	if len(problems) != 1 || !strings.Contains(problems[0], "10.244.0.6") {
		t.Errorf("problems %q, want the IPv4 address in the IPv6 slice", problems)
	}
}

// TestDesiredStateFamiliesSkipped: what a Service or the node lacks the
// family of is skipped, each with a problem, and the rest is programmed.
func TestDesiredStateFamiliesSkipped(t *testing.T) {
	tcp := v1.ProtocolTCP
	dual := testobj.Service("10.96.0.10", testobj.Port("", tcp, 80))
	dual.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
	single := testobj.Service("10.96.0.11", testobj.Port("", tcp, 80))
	single.Spec.ExternalIPs = []string{"2001:db8::7"}
	for name, c := range map[string]struct {
		svc       *v1.Service
		ipv6      bool
		addresses string
		problem   string
	}{
		"a node without IPv6":                  {dual, false, "10.96.0.10", "fd00:96::10 is IPv6, which this node does not have"},
		"an external IP of the missing family": {single, true, "10.96.0.11", "2001:db8::7 is IPv6, a family the Service has no cluster IP of"},
	} {
		st, problems := Compute(ServiceOf(c.svc), nil, &Config{Scheduler: "rr", IPv6Capable: c.ipv6}, Node{})
		var addrs []string
		for _, a := range st.Addresses {
			addrs = append(addrs, a.String())
		}
		if strings.Join(addrs, " ") != c.addresses {
			t.Errorf("%s: addresses %v, want %s", name, addrs, c.addresses)
		}
		if len(problems) != 1 || !strings.Contains(problems[0], c.problem) {
			t.Errorf("%s: problems %q, want one saying %q", name, problems, c.problem)
		}
	}
}

func TestIPv6SetNames(t *testing.T) {
	for in, want := range map[string]string{
		"KUBE-CLUSTER-IP":                "KUBE-6-CLUSTER-IP",
		"KUBE-LOAD-BALANCER-SOURCE-CIDR": "KUBE-6-LOAD-BALANCER-SOURCE-CID",
		"KUBE-NODE-PORT-LOCAL-SCTP-HASH": "KUBE-6-NODE-PORT-LOCAL-SCTP-HAS",
	} {
		if got := IPv6SetName(in); got != want {
			t.Errorf("ipv6SetName(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestHealthCheckCountsEachFamily: a dual-stack LoadBalancer with
// externalTrafficPolicy Local serves its health check in both families,
// each with the count of its own family's ready local endpoints.
func TestHealthCheckCountsEachFamily(t *testing.T) {
	cfg := &Config{NodeName: "me", Scheduler: "rr", IPv6Capable: true}
	tcp := v1.ProtocolTCP
	ports := []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)}
	slices := []*discovery.EndpointSlice{
		testobj.Slice("s-v4", ports, testobj.EP{IP: "10.244.0.5", Node: "me"}, testobj.EP{IP: "10.244.0.7", Node: "me"}),
		slice6("s-v6", ports, testobj.EP{IP: "fd00:244::5", Node: "me"}, testobj.EP{IP: "fd00:244::6", Node: "other"}),
	}
	lb := testobj.Service("10.96.0.10", v1.ServicePort{Protocol: tcp, Port: 80, NodePort: 30080})
	lb.Spec.Type, lb.Spec.ExternalTrafficPolicy = v1.ServiceTypeLoadBalancer, v1.ServiceExternalTrafficPolicyLocal
	lb.Spec.HealthCheckNodePort = 30271
	for name, c := range map[string]struct {
		clusterIPs []string
		in         [2]bool
		ready      [2]int
	}{
		"dual-stack": {[]string{"10.96.0.10", "fd00:96::10"}, [2]bool{true, true}, [2]int{2, 1}},
		"IPv6 only":  {[]string{"fd00:96::10"}, [2]bool{IPv6: true}, [2]int{IPv6: 1}},
	} {
		lb.Spec.ClusterIP, lb.Spec.ClusterIPs = c.clusterIPs[0], c.clusterIPs
		st, problems := Compute(ServiceOf(lb), read(slices...), cfg, Node{})
		if len(problems) != 0 {
			t.Errorf("%s: problems %q", name, problems)
		}
		if st.HealthCheckPort != 30271 || st.HealthCheckIn != c.in || st.LocalReady != c.ready {
			t.Errorf("%s: health check on %d in %v with %v local endpoints; want 30271 in %v with %v",
				name, st.HealthCheckPort, st.HealthCheckIn, st.LocalReady, c.in, c.ready)
		}
	}
}
