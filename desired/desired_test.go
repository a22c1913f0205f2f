package desired

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

func TestDesiredState(t *testing.T) {
	cfg := &Config{NodeName: "me", Scheduler: "rr"}
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	affinity := testobj.Service("10.96.0.20", testobj.Port("", tcp, 80))
	affinity.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	shortAffinity := testobj.Service("10.96.0.21", testobj.Port("", tcp, 80))
	shortAffinity.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	shortAffinity.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	external := testobj.Service("", testobj.Port("", tcp, 80))
	external.Spec.Type = v1.ServiceTypeExternalName
	annotated := func(ip, scheduler string) *v1.Service {
		s := testobj.Service(ip, testobj.Port("", tcp, 80))
		s.Annotations = map[string]string{SchedulerAnnotation: scheduler}
		return s
	}
	internalLocal := func(ip string) *v1.Service {
		s := testobj.Service(ip, testobj.Port("", tcp, 80))
		s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		return s
	}

	nodePort := func(ip string, etp v1.ServiceExternalTrafficPolicy, ports ...v1.ServicePort) *v1.Service {
		s := testobj.Service(ip, ports...)
		s.Spec.Type, s.Spec.ExternalTrafficPolicy = v1.ServiceTypeNodePort, etp
		return s
	}
	withNodePort := func(sp v1.ServicePort, np int32) v1.ServicePort {
		sp.NodePort = np
		return sp
	}
	cluster, localPolicy := v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal
	two := []netip.Addr{netip.MustParseAddr("10.0.2.15"), netip.MustParseAddr("192.168.7.1")}
	nodeIPs, firstIP := Node{All: two, NodePort: two, Primary: [2]netip.Addr{two[0]}}, Node{All: two[:1], NodePort: two[:1], Primary: [2]netip.Addr{two[0]}}
	loadBalancer := func(ip string, etp v1.ServiceExternalTrafficPolicy, ranges []string, ingress ...v1.LoadBalancerIngress) *v1.Service {
		s := testobj.Service(ip, testobj.Port("", tcp, 80))
		s.Spec.Type, s.Spec.ExternalTrafficPolicy, s.Spec.LoadBalancerSourceRanges = v1.ServiceTypeLoadBalancer, etp, ranges
		s.Status.LoadBalancer.Ingress = ingress
		return s
	}
	inZoneA := Node{Zone: "zone-a"}
	proxyMode, otherMode := v1.LoadBalancerIPModeProxy, v1.LoadBalancerIPMode("Teleport")
	mixedEndpoints := []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
		testobj.EP{IP: "10.244.0.1", Ready: testobj.Yes, Node: "me"}, testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Node: "other"})}
	remoteEndpoints := []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
		testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Node: "other"})}
	bothLocal := nodePort("10.96.0.54", cluster, withNodePort(testobj.Port("", tcp, 80), 30054))
	bothLocal.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)

	cases := []struct {
		name     string
		svc      *v1.Service
		slices   []*discovery.EndpointSlice
		nodeIPs  Node
		want     string
		problems int
	}{
		{
			name:    "NodePort TCP and UDP: a virtual server per node address, the port in the protocol's bitmap",
			svc:     nodePort("10.96.0.50", cluster, withNodePort(testobj.Port("http", tcp, 80), 30080), withNodePort(testobj.Port("dns", udp, 53), 30053)),
			nodeIPs: nodeIPs,
			slices: []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("http", tcp, 8080), testobj.SlicePort("dns", udp, 5353)},
				testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Node: "other"})},
			want: `vs 10.96.0.50:80/TCP rr
  rs 10.244.0.2:8080 w=1
vs 10.0.2.15:30080/TCP rr
  rs 10.244.0.2:8080 w=1
vs 192.168.7.1:30080/TCP rr
  rs 10.244.0.2:8080 w=1
vs 10.96.0.50:53/UDP rr
  rs 10.244.0.2:5353 w=1
vs 10.0.2.15:30053/UDP rr
  rs 10.244.0.2:5353 w=1
vs 192.168.7.1:30053/UDP rr
  rs 10.244.0.2:5353 w=1
addr 10.96.0.50
set KUBE-CLUSTER-IP 10.96.0.50,tcp:80
set KUBE-CLUSTER-IP 10.96.0.50,udp:53
set KUBE-IPVS-IPS 10.96.0.50
set KUBE-NODE-PORT-TCP 30080
set KUBE-NODE-PORT-UDP 30053`,
		},
		{
			name:    "NodePort SCTP: hash:ip,port entries, one per node address",
			svc:     nodePort("10.96.0.51", cluster, withNodePort(testobj.Port("", v1.ProtocolSCTP, 9), 30009)),
			nodeIPs: nodeIPs,
			want: `vs 10.96.0.51:9/SCTP rr
vs 10.0.2.15:30009/SCTP rr
vs 192.168.7.1:30009/SCTP rr
addr 10.96.0.51
set KUBE-CLUSTER-IP 10.96.0.51,sctp:9
set KUBE-IPVS-IPS 10.96.0.51
set KUBE-NODE-PORT-SCTP-HASH 10.0.2.15,sctp:30009
set KUBE-NODE-PORT-SCTP-HASH 192.168.7.1,sctp:30009`,
		},
		{
			name:    "externalTrafficPolicy Local: node ports get local endpoints and the LOCAL set, the cluster IP all",
			svc:     nodePort("10.96.0.52", localPolicy, withNodePort(testobj.Port("", tcp, 80), 30052)),
			nodeIPs: firstIP,
			slices:  mixedEndpoints,
			want: `vs 10.96.0.52:80/TCP rr
  rs 10.244.0.1:8080 w=1
  rs 10.244.0.2:8080 w=1
vs 10.0.2.15:30052/TCP rr
  rs 10.244.0.1:8080 w=1
addr 10.96.0.52
set KUBE-CLUSTER-IP 10.96.0.52,tcp:80
set KUBE-IPVS-IPS 10.96.0.52
set KUBE-LOOP-BACK 10.244.0.1,tcp:8080,10.244.0.1
set KUBE-NODE-PORT-LOCAL-TCP 30052
set KUBE-NODE-PORT-TCP 30052`,
		},
		{
			name:    "externalTrafficPolicy Local without local endpoints: node ports fall back to the cluster's, as upstream's IPVS mode",
			svc:     nodePort("10.96.0.53", localPolicy, withNodePort(testobj.Port("", tcp, 80), 30053)),
			nodeIPs: firstIP,
			slices:  remoteEndpoints,
			want: `vs 10.96.0.53:80/TCP rr
  rs 10.244.0.2:8080 w=1
vs 10.0.2.15:30053/TCP rr
  rs 10.244.0.2:8080 w=1
addr 10.96.0.53
set KUBE-CLUSTER-IP 10.96.0.53,tcp:80
set KUBE-IPVS-IPS 10.96.0.53
set KUBE-NODE-PORT-LOCAL-TCP 30053
set KUBE-NODE-PORT-TCP 30053
no local IPv4 endpoints for external traffic`,
		},
		{
			name:    "internalTrafficPolicy Local on a NodePort without local endpoints: the cluster IP falls back to the cluster's",
			svc:     bothLocal,
			nodeIPs: firstIP,
			slices:  remoteEndpoints,
			want: `vs 10.96.0.54:80/TCP rr
  rs 10.244.0.2:8080 w=1
vs 10.0.2.15:30054/TCP rr
  rs 10.244.0.2:8080 w=1
addr 10.96.0.54
set KUBE-CLUSTER-IP 10.96.0.54,tcp:80
set KUBE-IPVS-IPS 10.96.0.54
set KUBE-NODE-PORT-TCP 30054
no local IPv4 endpoints`,
		},
		{
			name: "external IPs: a virtual server each, bound unless the node has the address, bad ones skipped",
			svc: func() *v1.Service {
				s := testobj.Service("10.96.0.60", testobj.Port("", tcp, 80))
				s.Spec.ExternalIPs = []string{"203.0.113.7", "10.0.2.15", "fd00::7", "bogus", "203.0.113.7"}
				return s
			}(),
			nodeIPs:  nodeIPs,
			slices:   remoteEndpoints,
			problems: 2,
			want: `vs 10.96.0.60:80/TCP rr
  rs 10.244.0.2:8080 w=1
vs 203.0.113.7:80/TCP rr
  rs 10.244.0.2:8080 w=1
vs 10.0.2.15:80/TCP rr
  rs 10.244.0.2:8080 w=1
addr 10.96.0.60
addr 203.0.113.7
set KUBE-CLUSTER-IP 10.96.0.60,tcp:80
set KUBE-EXTERNAL-IP 10.0.2.15,tcp:80
set KUBE-EXTERNAL-IP 203.0.113.7,tcp:80
set KUBE-IPVS-IPS 10.96.0.60
set KUBE-IPVS-IPS 203.0.113.7`,
		},
		{
			name: "external IP with externalTrafficPolicy Local: this node's endpoints, the LOCAL set",
			svc: func() *v1.Service {
				s := testobj.Service("10.96.0.61", testobj.Port("", tcp, 80))
				s.Spec.ExternalIPs = []string{"203.0.113.8"}
				s.Spec.ExternalTrafficPolicy = localPolicy
				return s
			}(),
			slices: mixedEndpoints,
			want: `vs 10.96.0.61:80/TCP rr
  rs 10.244.0.1:8080 w=1
  rs 10.244.0.2:8080 w=1
vs 203.0.113.8:80/TCP rr
  rs 10.244.0.1:8080 w=1
addr 10.96.0.61
addr 203.0.113.8
set KUBE-CLUSTER-IP 10.96.0.61,tcp:80
set KUBE-EXTERNAL-IP-LOCAL 203.0.113.8,tcp:80
set KUBE-IPVS-IPS 10.96.0.61
set KUBE-IPVS-IPS 203.0.113.8
set KUBE-LOOP-BACK 10.244.0.1,tcp:8080,10.244.0.1`,
		},
		{
			name: "LoadBalancer: VIP ingress programmed, Proxy and hostname ones not; source ranges that hold the node let it in",
			svc: loadBalancer("10.96.0.70", cluster, []string{"192.168.0.0/16", "10.0.2.0/24", "fd00::/8"},
				v1.LoadBalancerIngress{IP: "198.51.100.7"}, v1.LoadBalancerIngress{IP: "198.51.100.8", IPMode: &proxyMode},
				v1.LoadBalancerIngress{Hostname: "lb.example"}),
			nodeIPs: firstIP,
			slices:  remoteEndpoints,
			want: `vs 10.96.0.70:80/TCP rr
  rs 10.244.0.2:8080 w=1
vs 198.51.100.7:80/TCP rr
  rs 10.244.0.2:8080 w=1
addr 10.96.0.70
addr 198.51.100.7
set KUBE-CLUSTER-IP 10.96.0.70,tcp:80
set KUBE-IPVS-IPS 10.96.0.70
set KUBE-IPVS-IPS 198.51.100.7
set KUBE-LOAD-BALANCER 198.51.100.7,tcp:80
set KUBE-LOAD-BALANCER-FW 198.51.100.7,tcp:80
set KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.7,tcp:80,10.0.2.0/24
set KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.7,tcp:80,192.168.0.0/16
set KUBE-LOAD-BALANCER-SOURCE-IP 198.51.100.7,tcp:80,198.51.100.7`,
		},
		{
			name: "LoadBalancer with externalTrafficPolicy Local, ranges without the node: blocked from it; bad input skipped",
			svc: func() *v1.Service {
				s := loadBalancer("10.96.0.71", localPolicy, []string{"192.168.0.0/16", "not-a-cidr"},
					v1.LoadBalancerIngress{IP: "198.51.100.9"}, v1.LoadBalancerIngress{IP: "198.51.100.10", IPMode: &otherMode},
					v1.LoadBalancerIngress{IP: "fd00::9"})
				s.Spec.HealthCheckNodePort = 30271
				return s
			}(),
			nodeIPs:  firstIP,
			slices:   mixedEndpoints,
			problems: 3,
			want: `vs 10.96.0.71:80/TCP rr
  rs 10.244.0.1:8080 w=1
  rs 10.244.0.2:8080 w=1
vs 198.51.100.9:80/TCP rr
  rs 10.244.0.1:8080 w=1
addr 10.96.0.71
addr 198.51.100.9
set KUBE-CLUSTER-IP 10.96.0.71,tcp:80
set KUBE-HEALTH-CHECK-NODE-PORT 30271
set KUBE-IPVS-IPS 10.96.0.71
set KUBE-IPVS-IPS 198.51.100.9
set KUBE-LOAD-BALANCER 198.51.100.9,tcp:80
set KUBE-LOAD-BALANCER-FW 198.51.100.9,tcp:80
set KUBE-LOAD-BALANCER-LOCAL 198.51.100.9,tcp:80
set KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.9,tcp:80,192.168.0.0/16
set KUBE-LOOP-BACK 10.244.0.1,tcp:8080,10.244.0.1
node blocked from 198.51.100.9,tcp:80
health check on 30271: 1 local endpoint (IPv4)`,
		},
		{
			name:    "zone hints for every ready endpoint, some for this node's zone: those alone",
			svc:     testobj.Service("10.96.0.80", testobj.Port("", tcp, 80)),
			nodeIPs: inZoneA,
			slices: []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
				testobj.EP{IP: "10.244.0.1", Ready: testobj.Yes, Zones: []string{"zone-a"}}, testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Zones: []string{"zone-b"}},
				testobj.EP{IP: "10.244.0.3", Ready: testobj.Yes, Zones: []string{"zone-b", "zone-a"}}, testobj.EP{IP: "10.244.0.4", Ready: testobj.No})},
			want: `vs 10.96.0.80:80/TCP rr
  rs 10.244.0.1:8080 w=1
  rs 10.244.0.3:8080 w=1
addr 10.96.0.80
set KUBE-CLUSTER-IP 10.96.0.80,tcp:80
set KUBE-IPVS-IPS 10.96.0.80`,
		},
		{
			name:    "zone hints missing on one ready endpoint: all endpoints",
			svc:     testobj.Service("10.96.0.81", testobj.Port("", tcp, 80)),
			nodeIPs: inZoneA,
			slices: []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
				testobj.EP{IP: "10.244.0.1", Ready: testobj.Yes, Zones: []string{"zone-a"}}, testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes})},
			want: `vs 10.96.0.81:80/TCP rr
  rs 10.244.0.1:8080 w=1
  rs 10.244.0.2:8080 w=1
addr 10.96.0.81
set KUBE-CLUSTER-IP 10.96.0.81,tcp:80
set KUBE-IPVS-IPS 10.96.0.81`,
		},
		{
			name:    "zone hints, none for this node's zone (or a node without one): all endpoints",
			svc:     testobj.Service("10.96.0.82", testobj.Port("", tcp, 80)),
			nodeIPs: inZoneA,
			slices: []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
				testobj.EP{IP: "10.244.0.1", Ready: testobj.Yes, Zones: []string{"zone-b"}}, testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Zones: []string{"zone-c"}})},
			want: `vs 10.96.0.82:80/TCP rr
  rs 10.244.0.1:8080 w=1
  rs 10.244.0.2:8080 w=1
addr 10.96.0.82
set KUBE-CLUSTER-IP 10.96.0.82,tcp:80
set KUBE-IPVS-IPS 10.96.0.82`,
		},
		{
			name:    "node hints for every ready endpoint, some for this node: those, before the zone's",
			svc:     testobj.Service("10.96.0.83", testobj.Port("", tcp, 80)),
			nodeIPs: inZoneA,
			slices: []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
				testobj.EP{IP: "10.244.0.1", Ready: testobj.Yes, Node: "me", Zones: []string{"zone-a"}, Nodes: []string{"me"}},
				testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Zones: []string{"zone-a"}, Nodes: []string{"other"}})},
			want: `vs 10.96.0.83:80/TCP rr
  rs 10.244.0.1:8080 w=1
addr 10.96.0.83
set KUBE-CLUSTER-IP 10.96.0.83,tcp:80
set KUBE-IPVS-IPS 10.96.0.83
set KUBE-LOOP-BACK 10.244.0.1,tcp:8080,10.244.0.1`,
		},
		{
			name: "NodePort without node addresses: the cluster IP alone",
			svc:  nodePort("10.96.0.55", cluster, withNodePort(testobj.Port("", tcp, 80), 30055)),
			want: `vs 10.96.0.55:80/TCP rr
addr 10.96.0.55
set KUBE-CLUSTER-IP 10.96.0.55,tcp:80
set KUBE-IPVS-IPS 10.96.0.55`,
		},
		{
			name:     "invalid nodePort: skipped with a problem, the cluster IP kept",
			svc:      nodePort("10.96.0.56", cluster, withNodePort(testobj.Port("", tcp, 80), 70000)),
			nodeIPs:  nodeIPs,
			problems: 1,
			want: `vs 10.96.0.56:80/TCP rr
addr 10.96.0.56
set KUBE-CLUSTER-IP 10.96.0.56,tcp:80
set KUBE-IPVS-IPS 10.96.0.56`,
		},
		{
			name: "ready endpoints on two ports, local ones hairpinned",
			svc:  testobj.Service("10.96.0.10", testobj.Port("http", tcp, 80), testobj.Port("dns", udp, 53)),
			slices: []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("http", tcp, 8080), testobj.SlicePort("dns", udp, 5353)},
				testobj.EP{IP: "10.244.0.1", Ready: testobj.Yes, Node: "me"}, testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Node: "other"})},
			want: `vs 10.96.0.10:80/TCP rr
  rs 10.244.0.1:8080 w=1
  rs 10.244.0.2:8080 w=1
vs 10.96.0.10:53/UDP rr
  rs 10.244.0.1:5353 w=1
  rs 10.244.0.2:5353 w=1
addr 10.96.0.10
set KUBE-CLUSTER-IP 10.96.0.10,tcp:80
set KUBE-CLUSTER-IP 10.96.0.10,udp:53
set KUBE-IPVS-IPS 10.96.0.10
set KUBE-LOOP-BACK 10.244.0.1,tcp:8080,10.244.0.1
set KUBE-LOOP-BACK 10.244.0.1,udp:5353,10.244.0.1`,
		},
		{
			name: "not ready skipped, nil conditions ready, a listing that is not terminating wins, else the first, unmatched port ignored",
			svc:  testobj.Service("10.96.0.10", testobj.Port("http", tcp, 80)),
			slices: []*discovery.EndpointSlice{
				testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("http", tcp, 8080), testobj.SlicePort("other", tcp, 9999)},
					testobj.EP{IP: "10.244.0.1"}, testobj.EP{IP: "10.244.0.2", Ready: testobj.No}, testobj.EP{IP: "10.244.0.3", Ready: testobj.No},
					testobj.EP{IP: "10.244.0.4", Ready: testobj.No, Serving: testobj.Yes, Terminating: testobj.Yes}, testobj.EP{IP: "10.244.0.5"}),
				testobj.Slice("b", []discovery.EndpointPort{testobj.SlicePort("http", tcp, 8080)},
					testobj.EP{IP: "10.244.0.1", Ready: testobj.No}, testobj.EP{IP: "10.244.0.3", Ready: testobj.Yes}, testobj.EP{IP: "10.244.0.4", Ready: testobj.Yes, Node: "me"},
					testobj.EP{IP: "10.244.0.5", Ready: testobj.No, Serving: testobj.Yes, Terminating: testobj.Yes, Node: "me"}),
			},
			want: `vs 10.96.0.10:80/TCP rr
  rs 10.244.0.1:8080 w=1
  rs 10.244.0.4:8080 w=1
  rs 10.244.0.5:8080 w=1
addr 10.96.0.10
set KUBE-CLUSTER-IP 10.96.0.10,tcp:80
set KUBE-IPVS-IPS 10.96.0.10
set KUBE-LOOP-BACK 10.244.0.4,tcp:8080,10.244.0.4`,
		},
		{
			name: "only terminating endpoints: serving ones are the fallback",
			svc:  testobj.Service("10.96.0.10", testobj.Port("", tcp, 80)),
			slices: []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
				testobj.EP{IP: "10.244.0.1", Ready: testobj.No, Serving: testobj.Yes, Terminating: testobj.Yes},
				testobj.EP{IP: "10.244.0.2", Ready: testobj.No, Serving: testobj.No, Terminating: testobj.Yes})},
			want: `vs 10.96.0.10:80/TCP rr
  rs 10.244.0.1:8080 w=1
addr 10.96.0.10
set KUBE-CLUSTER-IP 10.96.0.10,tcp:80
set KUBE-IPVS-IPS 10.96.0.10`,
		},
		{
			name: "ClientIP affinity: persistence with the default timeout",
			svc:  affinity,
			want: `vs 10.96.0.20:80/TCP rr flags=0x1 timeout=10800
addr 10.96.0.20
set KUBE-CLUSTER-IP 10.96.0.20,tcp:80
set KUBE-IPVS-IPS 10.96.0.20`,
		},
		{
			name: "ClientIP affinity with its own timeout",
			svc:  shortAffinity,
			want: `vs 10.96.0.21:80/TCP rr flags=0x1 timeout=60
addr 10.96.0.21
set KUBE-CLUSTER-IP 10.96.0.21,tcp:80
set KUBE-IPVS-IPS 10.96.0.21`,
		},
		{
			name: "internalTrafficPolicy Local: only this node's ready endpoints",
			svc:  internalLocal("10.96.0.30"),
			slices: []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
				testobj.EP{IP: "10.244.0.1", Ready: testobj.Yes, Node: "me"}, testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Node: "other"},
				testobj.EP{IP: "10.244.0.3", Ready: testobj.No, Serving: testobj.Yes, Terminating: testobj.Yes, Node: "me"})},
			want: `vs 10.96.0.30:80/TCP rr
  rs 10.244.0.1:8080 w=1
addr 10.96.0.30
set KUBE-CLUSTER-IP 10.96.0.30,tcp:80
set KUBE-IPVS-IPS 10.96.0.30
set KUBE-LOOP-BACK 10.244.0.1,tcp:8080,10.244.0.1
set KUBE-LOOP-BACK 10.244.0.3,tcp:8080,10.244.0.3`,
		},
		{
			name: "internalTrafficPolicy Local: a local terminating endpoint serves when no local one is ready, even with remote ready ones",
			svc:  internalLocal("10.96.0.31"),
			slices: []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
				testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Node: "other"},
				testobj.EP{IP: "10.244.0.3", Ready: testobj.No, Serving: testobj.Yes, Terminating: testobj.Yes, Node: "me"})},
			want: `vs 10.96.0.31:80/TCP rr
  rs 10.244.0.3:8080 w=1
addr 10.96.0.31
set KUBE-CLUSTER-IP 10.96.0.31,tcp:80
set KUBE-IPVS-IPS 10.96.0.31
set KUBE-LOOP-BACK 10.244.0.3,tcp:8080,10.244.0.3`,
		},
		{
			name: "internalTrafficPolicy Local without local endpoints: no real server, traffic dropped",
			svc:  internalLocal("10.96.0.32"),
			slices: []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
				testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Node: "other"})},
			want: `vs 10.96.0.32:80/TCP rr
addr 10.96.0.32
set KUBE-CLUSTER-IP 10.96.0.32,tcp:80
set KUBE-IPVS-IPS 10.96.0.32
no local IPv4 endpoints`,
		},
		{
			name: "scheduler annotation overrides the node's",
			svc:  annotated("10.96.0.40", "wlc"),
			want: `vs 10.96.0.40:80/TCP wlc
addr 10.96.0.40
set KUBE-CLUSTER-IP 10.96.0.40,tcp:80
set KUBE-IPVS-IPS 10.96.0.40`,
		},
		{
			name:     "unknown scheduler in the annotation: the node's, with a problem",
			svc:      annotated("10.96.0.41", "fastest"),
			problems: 1,
			want: `vs 10.96.0.41:80/TCP rr
addr 10.96.0.41
set KUBE-CLUSTER-IP 10.96.0.41,tcp:80
set KUBE-IPVS-IPS 10.96.0.41`,
		},
		{name: "headless programs nothing", svc: testobj.Service("None", testobj.Port("", tcp, 80))},
		{name: "ExternalName programs nothing", svc: external},
		{name: "deleted service programs nothing"},
		{name: "IPv6 cluster IP skipped with a problem", svc: testobj.Service("fd00::10", testobj.Port("", tcp, 80)), problems: 1},
		{
			name: "bad ports skipped, good one kept",
			svc:  testobj.Service("10.96.0.10", testobj.Port("a", tcp, 0), testobj.Port("b", "ICMP", 80), testobj.Port("c", udp, 53)),
			want: `vs 10.96.0.10:53/UDP rr
addr 10.96.0.10
set KUBE-CLUSTER-IP 10.96.0.10,udp:53
set KUBE-IPVS-IPS 10.96.0.10`,
			problems: 2,
		},
		{
			name: "wrong-family and IPv6 slices ignored",
			svc:  testobj.Service("10.96.0.10", testobj.Port("", tcp, 80)),
			slices: []*discovery.EndpointSlice{
				func() *discovery.EndpointSlice {
					s := testobj.Slice("v6", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)}, testobj.EP{IP: "fd00::1"})
					s.AddressType = discovery.AddressTypeIPv6
					return s
				}(),
				testobj.Slice("v4", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)}, testobj.EP{IP: "fd00::2"}, testobj.EP{IP: "10.244.0.9"}),
			},
			want: `vs 10.96.0.10:80/TCP rr
  rs 10.244.0.9:8080 w=1
addr 10.96.0.10
set KUBE-CLUSTER-IP 10.96.0.10,tcp:80
set KUBE-IPVS-IPS 10.96.0.10`,
			problems: 1,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, problems := Compute(ServiceOf(c.svc), read(c.slices...), cfg, c.nodeIPs)
			if got := st.String(); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
			if len(problems) != c.problems {
				t.Errorf("problems %q, want %d", problems, c.problems)
			}
		})
	}
}

func TestDesiredStateMaglevFlags(t *testing.T) {
	byAnnotation := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	byAnnotation.Annotations = map[string]string{SchedulerAnnotation: "mh"}
	for name, c := range map[string]struct {
		svc *v1.Service
		cfg *Config
	}{
		"--ipvs-scheduler": {testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80)), &Config{Scheduler: "mh"}},
		"annotation":       {byAnnotation, &Config{Scheduler: "rr"}},
	} {
		st, _ := Compute(ServiceOf(c.svc), nil, c.cfg, Node{})
		vs := st.VirtualServers[0].Virtual
		if vs.Scheduler != "mh" || vs.Flags != 0x10 {
			t.Errorf("%s: mh virtual server %+v, want scheduler mh with the mh-port flag (IP_VS_SVC_F_SCHED2, as upstream)", name, vs)
		}
	}
}

// read is the slices as the informers' cache holds them.
func read(in ...*discovery.EndpointSlice) []*Slice {
	out := make([]*Slice, len(in))
	for i, s := range in {
		out[i] = SliceOf(s)
	}
	return out
}
