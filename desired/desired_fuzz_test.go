package desired

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// fuzzAddrs are the addresses a fuzzed Service and its slices draw from:
// ordinary ones, legacy forms, the node's own, special ones (unspecified,
// loopback, multicast, link-local, broadcast, zoned, IPv4-mapped) and junk.
var fuzzAddrs = []string{"10.96.0.10", "010.096.000.010", "fd00::10", "10.96.0.11", "203.0.113.7", "2001:db8::7",
	"10.244.0.1", "10.244.0.2", "fd00:244::1", "10.0.2.15", "fd00:2::15", "0.0.0.0", "::", "127.0.0.1", "::1",
	"224.0.0.1", "ff02::1", "169.254.0.1", "fe80::1", "fe80::1%eth0", "255.255.255.255", "::ffff:10.96.0.12",
	"", "None", "bogus", " 10.96.0.13"}

var fuzzRanges = []string{"10.0.0.0/8", "010.000.000.000/08", " 192.168.0.0/16 ", "0.0.0.0/0", "::/0", "fd00::/64",
	"10.0.2.15/32", "::ffff:10.0.0.0/104", "10.0.0.0/33", "bogus", ""}

// fuzzService builds a Service and its slices (sorted by name, as the
// tracker gives them) from the fuzzer's bytes, with extra the fuzzer's
// own strings for addresses.
func fuzzService(b *testobj.FuzzBytes, extra ...string) (*v1.Service, []*discovery.EndpointSlice) {
	addrs := append(slices.Clone(fuzzAddrs), extra...)
	num := func() int32 {
		return testobj.Choose(b, int32(80), 443, 0, -1, 65535, 65536, math.MinInt32, int32(b.Next())<<8|int32(b.Next()))
	}
	proto := func() v1.Protocol { return testobj.Choose[v1.Protocol](b, "TCP", "UDP", "SCTP", "ICMP", "") }
	name := func() string { return testobj.Choose(b, "", "a", "b") }
	svc := &v1.Service{Spec: v1.ServiceSpec{Type: testobj.Choose(b, v1.ServiceTypeLoadBalancer, v1.ServiceTypeNodePort,
		v1.ServiceTypeClusterIP, v1.ServiceTypeExternalName)}}
	svc.Namespace, svc.Name = "ns", "s"
	for range b.Next() % 3 {
		svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, testobj.Choose(b, addrs...))
	}
	svc.Spec.ClusterIP = testobj.Choose(b, addrs...)
	if len(svc.Spec.ClusterIPs) > 0 && b.Next()%2 == 0 {
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	}
	for range b.Next() % 5 {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: name(), Protocol: proto(), Port: num(),
			NodePort: testobj.Choose(b, 0, 30080, num())})
	}
	for range b.Next() % 4 {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, testobj.Choose(b, addrs...))
	}
	for range b.Next() % 3 {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: testobj.Choose(b, addrs...),
			IPMode: testobj.Choose(b, nil, ptr.To(v1.LoadBalancerIPModeVIP), ptr.To(v1.LoadBalancerIPModeProxy), ptr.To[v1.LoadBalancerIPMode]("Bogus"), ptr.To[v1.LoadBalancerIPMode](""))})
	}
	for range b.Next() % 3 {
		svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, testobj.Choose(b, append(slices.Clone(fuzzRanges), extra...)...))
	}
	if b.Next()%2 == 1 {
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		if t := testobj.Choose(b, -2, 0, -1, 1, 86400, 86401, math.MinInt32, 10800); t != -2 {
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(t))}}
		}
	}
	svc.Spec.ExternalTrafficPolicy = testobj.Choose(b, v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal, "")
	svc.Spec.InternalTrafficPolicy = testobj.Choose(b, nil, ptr.To(v1.ServiceInternalTrafficPolicyLocal), ptr.To(v1.ServiceInternalTrafficPolicyCluster))
	svc.Spec.HealthCheckNodePort = testobj.Choose(b, 0, 30300, num())
	if s := testobj.Choose(b, "", "rr", "mh", "sh", "fastest"); s != "" {
		svc.Annotations = map[string]string{SchedulerAnnotation: s}
	}
	var sl []*discovery.EndpointSlice
	for i := range b.Next() % 4 {
		s := &discovery.EndpointSlice{AddressType: testobj.Choose(b, discovery.AddressTypeIPv4, discovery.AddressTypeIPv6, discovery.AddressTypeFQDN)}
		s.Name = fmt.Sprintf("s-%d", i)
		for range b.Next() % 3 {
			s.Ports = append(s.Ports, discovery.EndpointPort{Name: testobj.Choose(b, nil, ptr.To(""), ptr.To("a")),
				Protocol: testobj.Choose(b, nil, ptr.To(proto())), Port: testobj.Choose(b, nil, ptr.To(num()))})
		}
		for range b.Next() % 5 {
			e := discovery.Endpoint{NodeName: testobj.Choose(b, nil, ptr.To("me"), ptr.To("other"))}
			for range b.Next() % 3 {
				e.Addresses = append(e.Addresses, testobj.Choose(b, addrs...))
			}
			cond := func() *bool { return testobj.Choose(b, nil, ptr.To(true), ptr.To(false)) }
			e.Conditions = discovery.EndpointConditions{Ready: cond(), Serving: cond(), Terminating: cond()}
			if b.Next()%2 == 1 {
				e.Hints = &discovery.EndpointHints{}
				for range b.Next() % 3 {
					e.Hints.ForZones = append(e.Hints.ForZones, discovery.ForZone{Name: testobj.Choose(b, "zone-a", "zone-b")})
				}
				for range b.Next() % 3 {
					e.Hints.ForNodes = append(e.Hints.ForNodes, discovery.ForNode{Name: testobj.Choose(b, "me", "other")})
				}
			}
			s.Endpoints = append(s.Endpoints, e)
		}
		sl = append(sl, s)
	}
	return svc, sl
}

// FuzzDesiredState feeds Compute a Service built from the fuzzer's
// bytes: many ports, dual-stack clusterIPs, external and ingress IPs,
// source ranges, affinity, traffic policies, and many slices of endpoints
// with conditions, node and zone hints, in any family, with ordinary,
// legacy, special and junk addresses. It checks what must hold for any
// input: no panic; the same answer twice; only kernel objects the kernel
// takes (valid ports and addresses, no mapped or zoned one, real servers
// of their virtual server's family, known sets and schedulers, entries of
// their set's family, no /0 net, affinity within 1..86400 s, every bound
// address in its family's KUBE-IPVS-IPS); and that any input it drops is
// reported. Special addresses are bound as upstream binds them (it relies
// on the apiserver's validation); only their form is checked. make unit
// runs it briefly; make fuzz longer.
func FuzzDesiredState(f *testing.F) {
	f.Add([]byte{0, 2, 0, 2, 0, 1, 1, 2, 0, 0, 0, 0, 1, 0, 0, 2, 2, 4, 3, 1, 0, 2, 1, 0, 1, 1, 0, 0, 3, 1, 1, 1, 1, 2, 6, 2, 1, 6, 1, 1, 3,
		0, 1, 0, 0, 2, 1, 1, 2, 1, 1, 1, 1, 1, 2, 0, 1, 0, 1, 1, 2, 1, 1, 1, 1, 0, 2, 1, 1, 0}, "10.96.0.20", "2001:db8::/64")
	f.Add([]byte{0, 2, 1, 2, 0, 3, 0, 1, 0, 0, 2, 2, 1, 0, 0, 0, 3, 4, 5, 6, 2, 7, 8, 2, 9, 10, 1, 5, 3, 3, 1, 2, 2, 1, 1, 0, 2, 0, 1, 0, 2}, "fe80::2%lo", "010.0.0.1/8")
	f.Add([]byte("a fairly long and arbitrary seed string that drives many choices at once"), "", "")
	node4, node6 := netip.MustParseAddr("10.0.2.15"), netip.MustParseAddr("fd00:2::15")
	node := Node{All: []netip.Addr{node4, node6}, NodePort: []netip.Addr{node4, node6},
		Primary: [2]netip.Addr{node4, node6}, Zone: "zone-a"}
	family := map[string]Family{}
	for _, s := range AllSets() {
		family[s.Name] = IPv4
		if s.Family == "inet6" {
			family[s.Name] = IPv6
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, s1, s2 string) {
		b := testobj.FuzzBytes(data)
		svc, sl := fuzzService(&b, s1, s2)
		cfg := &Config{NodeName: "me", Scheduler: "rr", IPv6Capable: b.Next()%4 != 0, IgnoreExternalIPs: b.Next()%4 == 0}

		st, problems := Compute(ServiceOf(svc), read(sl...), cfg, node)
		if again, _ := Compute(ServiceOf(svc), read(sl...), cfg, node); again.String() != st.String() {
			t.Fatalf("two answers for one input:\n%s\n---\n%s", st.String(), again.String())
		}
		checkKernelObjects(t, svc, st, family)
		if len(problems) == 0 && programsClusterIP(ServiceOf(svc)) {
			if bad := droppedInput(svc, sl, st, cfg); bad != "" {
				t.Fatalf("%s dropped without a problem reported:\n%s", bad, st.String())
			}
		}
	})
}

// usable says whether a is an address the kernel can take as given.
func usable(a netip.Addr) bool { return a.IsValid() && !a.Is4In6() && a.Zone() == "" }

func checkKernelObjects(t *testing.T, svc *v1.Service, st State, family map[string]Family) {
	t.Helper()
	affinity := svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP
	for _, v := range st.VirtualServers {
		a := v.Virtual.Address
		if !usable(a) || v.Virtual.Port == 0 || v.Virtual.Protocol.Number() == 0 || !slices.Contains(Schedulers, v.Virtual.Scheduler) {
			t.Fatalf("virtual server the kernel cannot take: %+v", v.Virtual)
		}
		persistent := v.Virtual.Flags&objects.FlagPersistent != 0
		if persistent != affinity || persistent && (v.Virtual.Timeout < 1 || v.Virtual.Timeout > maxStickyTimeout) || !persistent && v.Virtual.Timeout != 0 {
			t.Fatalf("affinity %v programmed as flags %#x timeout %d", affinity, v.Virtual.Flags, v.Virtual.Timeout)
		}
		for _, r := range v.Reals {
			if !usable(r.Address) || FamilyOf(r.Address) != FamilyOf(a) || r.Port == 0 || r.Weight != 1 {
				t.Fatalf("real server the kernel cannot take: %+v in %s", r, a)
			}
		}
	}
	for _, a := range st.Addresses {
		if ips := FamilyOf(a).SetName(SetIPVSIPs); !usable(a) || !slices.Contains(st.Entries, SetEntry{ips, objects.Entry{IP: a}}) {
			t.Fatalf("address %s not bound as it must be, or not in %s", a, ips)
		}
	}
	for _, e := range st.Entries {
		fam, ok := family[e.Set]
		if !ok {
			t.Fatalf("entry in an unknown set: %s", e)
		}
		for _, a := range []netip.Addr{e.Entry.IP, e.Entry.IP2, e.Entry.Net().Addr()} {
			if a.IsValid() && (FamilyOf(a) != fam || !usable(a)) {
				t.Fatalf("entry of the wrong family for its set, or unusable: %s", e)
			}
		}
		if e.Entry.Net().IsValid() && e.Entry.Net().Bits() == 0 {
			t.Fatalf("a /0 net, which hash:ip,port,net refuses: %s", e)
		}
		if e.Entry.IP.IsValid() && e.Entry.Protocol != 0 && e.Entry.Port == 0 && e.Set != FamilyOf(e.Entry.IP).SetName(SetIPVSIPs) {
			t.Fatalf("entry of port 0: %s", e)
		}
	}
}

// droppedInput names a part of the input that parses as nothing the
// kernel gets, or "" if none: a bad port, a cluster, external or ingress
// IP or source range that does not parse or has no virtual server, an
// endpoint address that is not of its slice's family. External IPs that
// cfg says to ignore (AllowServiceExternalIPs off) are dropped silently,
// as upstream drops them.
func droppedInput(svc *v1.Service, sl []*discovery.EndpointSlice, st State, cfg *Config) string {
	served := map[netip.Addr]bool{}
	fams := map[discovery.AddressType]bool{}
	for _, v := range st.VirtualServers {
		served[v.Virtual.Address] = true
		fams[FamilyOf(v.Virtual.Address).addressType()] = true
	}
	validPort := false
	for _, sp := range svc.Spec.Ports {
		if objects.Protocol(sp.Protocol).Number() == 0 || sp.Port <= 0 || sp.Port > 65535 || sp.NodePort < 0 || sp.NodePort > 65535 {
			return fmt.Sprintf("port %+v", sp)
		}
		validPort = true
	}
	if !validPort {
		return ""
	}
	ips := slices.Clone(svc.Spec.ClusterIPs)
	if !cfg.IgnoreExternalIPs {
		ips = append(ips, svc.Spec.ExternalIPs...)
	}
	if len(svc.Spec.ClusterIPs) == 0 {
		ips = append(ips, svc.Spec.ClusterIP)
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" && ing.IPMode != nil && *ing.IPMode != v1.LoadBalancerIPModeVIP && *ing.IPMode != v1.LoadBalancerIPModeProxy {
			return "ingress mode " + string(*ing.IPMode)
		}
		if ing.IP != "" && (ing.IPMode == nil || *ing.IPMode == v1.LoadBalancerIPModeVIP) {
			ips = append(ips, ing.IP)
		}
	}
	for _, s := range ips {
		if a, ok := ParseAddr(s); !ok || !served[a] {
			return "address " + s
		}
	}
	for _, r := range svc.Spec.LoadBalancerSourceRanges {
		if p, ok := ParsePrefix(strings.TrimSpace(r)); !ok || p.Addr().Is4In6() {
			return "source range " + r
		}
	}
	for _, s := range sl {
		if !fams[s.AddressType] {
			continue
		}
		for _, p := range s.Ports {
			if !slices.ContainsFunc(svc.Spec.Ports, func(sp v1.ServicePort) bool {
				return sp.Name == ptr.Deref(p.Name, "") && sp.Protocol == ptr.Deref(p.Protocol, v1.ProtocolTCP)
			}) {
				continue
			}
			if p.Port == nil || *p.Port <= 0 || *p.Port > 65535 {
				return "slice port " + s.Name
			}
			for _, e := range s.Endpoints {
				if len(e.Addresses) == 0 {
					continue
				}
				if a, ok := ParseAddr(e.Addresses[0]); !ok || FamilyOf(a).addressType() != s.AddressType {
					return "endpoint " + e.Addresses[0]
				}
			}
		}
	}
	return ""
}
