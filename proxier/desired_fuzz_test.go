package proxier

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

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// fuzzBytes hands out the fuzzer's bytes as choices; 0 once they run out.
type fuzzBytes []byte

func (b *fuzzBytes) next() int {
	if len(*b) == 0 {
		return 0
	}
	v := (*b)[0]
	*b = (*b)[1:]
	return int(v)
}

// choose picks one of the options.
func choose[T any](b *fuzzBytes, options ...T) T { return options[b.next()%len(options)] }

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
func fuzzService(b *fuzzBytes, extra ...string) (*v1.Service, []*discovery.EndpointSlice) {
	addrs := append(slices.Clone(fuzzAddrs), extra...)
	num := func() int32 {
		return choose(b, int32(80), 443, 0, -1, 65535, 65536, math.MinInt32, int32(b.next())<<8|int32(b.next()))
	}
	proto := func() v1.Protocol { return choose[v1.Protocol](b, "TCP", "UDP", "SCTP", "ICMP", "") }
	name := func() string { return choose(b, "", "a", "b") }
	svc := &v1.Service{Spec: v1.ServiceSpec{Type: choose(b, v1.ServiceTypeLoadBalancer, v1.ServiceTypeNodePort,
		v1.ServiceTypeClusterIP, v1.ServiceTypeExternalName)}}
	svc.Namespace, svc.Name = "ns", "s"
	for range b.next() % 3 {
		svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, choose(b, addrs...))
	}
	svc.Spec.ClusterIP = choose(b, addrs...)
	if len(svc.Spec.ClusterIPs) > 0 && b.next()%2 == 0 {
		svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	}
	for range b.next() % 5 {
		svc.Spec.Ports = append(svc.Spec.Ports, v1.ServicePort{Name: name(), Protocol: proto(), Port: num(),
			NodePort: choose(b, 0, 30080, num())})
	}
	for range b.next() % 4 {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, choose(b, addrs...))
	}
	for range b.next() % 3 {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: choose(b, addrs...),
			IPMode: choose(b, nil, ptr.To(v1.LoadBalancerIPModeVIP), ptr.To(v1.LoadBalancerIPModeProxy), ptr.To[v1.LoadBalancerIPMode]("Bogus"))})
	}
	for range b.next() % 3 {
		svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, choose(b, append(slices.Clone(fuzzRanges), extra...)...))
	}
	if b.next()%2 == 1 {
		svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		if t := choose(b, -2, 0, -1, 1, 86400, 86401, math.MinInt32, 10800); t != -2 {
			svc.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(int32(t))}}
		}
	}
	svc.Spec.ExternalTrafficPolicy = choose(b, v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal, "")
	svc.Spec.InternalTrafficPolicy = choose(b, nil, ptr.To(v1.ServiceInternalTrafficPolicyLocal), ptr.To(v1.ServiceInternalTrafficPolicyCluster))
	svc.Spec.HealthCheckNodePort = choose(b, 0, 30300, num())
	if s := choose(b, "", "rr", "mh", "sh", "fastest"); s != "" {
		svc.Annotations = map[string]string{SchedulerAnnotation: s}
	}
	var sl []*discovery.EndpointSlice
	for i := range b.next() % 4 {
		s := &discovery.EndpointSlice{AddressType: choose(b, discovery.AddressTypeIPv4, discovery.AddressTypeIPv6, discovery.AddressTypeFQDN)}
		s.Name = fmt.Sprintf("s-%d", i)
		for range b.next() % 3 {
			s.Ports = append(s.Ports, discovery.EndpointPort{Name: choose(b, nil, ptr.To(""), ptr.To("a")),
				Protocol: choose(b, nil, ptr.To(proto())), Port: choose(b, nil, ptr.To(num()))})
		}
		for range b.next() % 5 {
			e := discovery.Endpoint{NodeName: choose(b, nil, ptr.To("me"), ptr.To("other"))}
			for range b.next() % 3 {
				e.Addresses = append(e.Addresses, choose(b, addrs...))
			}
			cond := func() *bool { return choose(b, nil, ptr.To(true), ptr.To(false)) }
			e.Conditions = discovery.EndpointConditions{Ready: cond(), Serving: cond(), Terminating: cond()}
			if b.next()%2 == 1 {
				e.Hints = &discovery.EndpointHints{}
				for range b.next() % 3 {
					e.Hints.ForZones = append(e.Hints.ForZones, discovery.ForZone{Name: choose(b, "zone-a", "zone-b")})
				}
				for range b.next() % 3 {
					e.Hints.ForNodes = append(e.Hints.ForNodes, discovery.ForNode{Name: choose(b, "me", "other")})
				}
			}
			s.Endpoints = append(s.Endpoints, e)
		}
		sl = append(sl, s)
	}
	return svc, sl
}

// FuzzDesiredState feeds desiredState a Service built from the fuzzer's
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
	node := nodeAddrs{all: []netip.Addr{node4, node6}, nodePort: []netip.Addr{node4, node6},
		primary: [2]netip.Addr{node4, node6}, zone: "zone-a"}
	family := map[string]ipFamily{}
	for _, s := range allSets() {
		family[s.Name] = ipv4
		if s.Family == "inet6" {
			family[s.Name] = ipv6
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, s1, s2 string) {
		b := fuzzBytes(data)
		svc, sl := fuzzService(&b, s1, s2)
		cfg := &Config{NodeName: "me", Scheduler: "rr", IPv6Capable: b.next()%4 != 0, IgnoreNodeHints: b.next()%4 == 0}

		st, problems := desiredState(svc, sl, cfg, node)
		if again, _ := desiredState(svc, sl, cfg, node); render(again) != render(st) {
			t.Fatalf("two answers for one input:\n%s\n---\n%s", render(st), render(again))
		}
		checkKernelObjects(t, svc, st, family)
		if len(problems) == 0 && programsClusterIP(svc) {
			if bad := droppedInput(svc, sl, st); bad != "" {
				t.Fatalf("%s dropped without a problem reported:\n%s", bad, render(st))
			}
		}
	})
}

// usable says whether a is an address the kernel can take as given.
func usable(a netip.Addr) bool { return a.IsValid() && !a.Is4In6() && a.Zone() == "" }

func checkKernelObjects(t *testing.T, svc *v1.Service, st serviceState, family map[string]ipFamily) {
	t.Helper()
	affinity := svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP
	for _, v := range st.virtualServers {
		a := v.vs.Address
		if !usable(a) || v.vs.Port == 0 || v.vs.Protocol.Number() == 0 || !slices.Contains(Schedulers, v.vs.Scheduler) {
			t.Fatalf("virtual server the kernel cannot take: %+v", v.vs)
		}
		persistent := v.vs.Flags&ipvs.FlagPersistent != 0
		if persistent != affinity || persistent && (v.vs.Timeout < 1 || v.vs.Timeout > maxStickyTimeout) || !persistent && v.vs.Timeout != 0 {
			t.Fatalf("affinity %v programmed as flags %#x timeout %d", affinity, v.vs.Flags, v.vs.Timeout)
		}
		for _, r := range v.real {
			if !usable(r.Address) || familyOf(r.Address) != familyOf(a) || r.Port == 0 || r.Weight != 1 {
				t.Fatalf("real server the kernel cannot take: %+v in %s", r, a)
			}
		}
	}
	for _, a := range st.addresses {
		if ips := familyOf(a).set(setIPVSIPs); !usable(a) || !slices.Contains(st.entries, setEntry{ips, ipset.Entry{IP: a}}) {
			t.Fatalf("address %s not bound as it must be, or not in %s", a, ips)
		}
	}
	for _, e := range st.entries {
		fam, ok := family[e.set]
		if !ok {
			t.Fatalf("entry in an unknown set: %s", e)
		}
		for _, a := range []netip.Addr{e.entry.IP, e.entry.IP2, e.entry.Net.Addr()} {
			if a.IsValid() && (familyOf(a) != fam || !usable(a)) {
				t.Fatalf("entry of the wrong family for its set, or unusable: %s", e)
			}
		}
		if e.entry.Net.IsValid() && e.entry.Net.Bits() == 0 {
			t.Fatalf("a /0 net, which hash:ip,port,net refuses: %s", e)
		}
		if e.entry.IP.IsValid() && e.entry.Protocol != "" && e.entry.Port == 0 && e.set != familyOf(e.entry.IP).set(setIPVSIPs) {
			t.Fatalf("entry of port 0: %s", e)
		}
	}
}

// droppedInput names a part of the input that parses as nothing the
// kernel gets, or "" if none: a bad port, a cluster, external or ingress
// IP or source range that does not parse or has no virtual server, an
// endpoint address that is not of its slice's family.
func droppedInput(svc *v1.Service, sl []*discovery.EndpointSlice, st serviceState) string {
	served := map[netip.Addr]bool{}
	fams := map[discovery.AddressType]bool{}
	for _, v := range st.virtualServers {
		served[v.vs.Address] = true
		fams[familyOf(v.vs.Address).addressType()] = true
	}
	validPort := false
	for _, sp := range svc.Spec.Ports {
		if ipvs.Protocol(sp.Protocol).Number() == 0 || sp.Port <= 0 || sp.Port > 65535 || sp.NodePort < 0 || sp.NodePort > 65535 {
			return fmt.Sprintf("port %+v", sp)
		}
		validPort = true
	}
	if !validPort {
		return ""
	}
	ips := append(slices.Clone(svc.Spec.ClusterIPs), svc.Spec.ExternalIPs...)
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
		if a, ok := parseAPIAddr(s); !ok || !served[a] {
			return "address " + s
		}
	}
	for _, r := range svc.Spec.LoadBalancerSourceRanges {
		if p, ok := parseAPIPrefix(strings.TrimSpace(r)); !ok || p.Addr().Is4In6() {
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
				if a, ok := parseAPIAddr(e.Addresses[0]); !ok || familyOf(a).addressType() != s.AddressType {
					return "endpoint " + e.Addresses[0]
				}
			}
		}
	}
	return ""
}
