package proxier

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
)

// FuzzDesiredState feeds desiredState one Service with one port, one
// slice with one endpoint, and any values in them, and checks what must
// hold for any input: no panic, the same answer twice, and only kernel
// objects the kernel can take (real servers of their virtual server's
// family, known sets and schedulers, every entry's address of its set's
// family, every bound address in its family's KUBE-IPVS-IPS). make test runs
// it briefly; make fuzz longer.
func FuzzDesiredState(f *testing.F) {
	f.Add("10.96.0.10", "TCP", int32(80), int32(30080), "203.0.113.7", "198.51.100.7", "VIP", "10.0.0.0/8",
		true, false, "10.244.0.1", int32(8080), true, true, "zone-a", int32(30300), "wlc")
	f.Add("fd00::1", "SCTP", int32(0), int32(-1), "bogus", "", "Proxy", "::/0",
		false, true, "not-an-ip", int32(70000), false, false, "", int32(0), "fastest")
	f.Add("fd00::10", "TCP", int32(80), int32(30080), "2001:db8::7", "10.1.2.3", "VIP", "2001:db8::/64",
		true, false, "fd00:244::5", int32(8080), true, true, "zone-a", int32(30300), "rr")
	f.Add("None", "UDP", int32(65535), int32(65536), "10.0.2.15", "10.0.2.15", "Teleport", "bad",
		true, true, "10.244.0.2", int32(0), false, true, "zone-b", int32(-5), "mh")
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
	f.Fuzz(func(t *testing.T, clusterIP, proto string, port, nodePort int32, externalIP, ingressIP, ipMode, sourceRange string,
		externalLocal, internalLocal bool, epAddr string, epPort int32, ready, here bool, zone string, healthPort int32, scheduler string) {
		svc := &v1.Service{Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ClusterIP: clusterIP,
			Ports:       []v1.ServicePort{{Protocol: v1.Protocol(proto), Port: port, NodePort: nodePort}},
			ExternalIPs: []string{externalIP}, LoadBalancerSourceRanges: []string{sourceRange}, HealthCheckNodePort: healthPort}}
		svc.Namespace, svc.Name = "ns", "s"
		svc.Annotations = map[string]string{SchedulerAnnotation: scheduler}
		mode := v1.LoadBalancerIPMode(ipMode)
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ingressIP, IPMode: &mode}}
		if externalLocal {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}
		if internalLocal {
			svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}
		e := discovery.Endpoint{Addresses: []string{epAddr}, Conditions: discovery.EndpointConditions{Ready: &ready},
			Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zone}}}}
		if here {
			e.NodeName = ptr.To("me")
		}
		sl := &discovery.EndpointSlice{AddressType: discovery.AddressTypeIPv4, Endpoints: []discovery.Endpoint{e},
			Ports: []discovery.EndpointPort{{Protocol: ptr.To(v1.Protocol(proto)), Port: &epPort}}}
		if strings.Contains(epAddr, ":") {
			sl.AddressType = discovery.AddressTypeIPv6
		}
		cfg := &Config{NodeName: "me", Scheduler: "rr", IPv6Capable: true}

		st, _ := desiredState(svc, []*discovery.EndpointSlice{sl}, cfg, node)
		if again, _ := desiredState(svc, []*discovery.EndpointSlice{sl}, cfg, node); render(again) != render(st) {
			t.Fatalf("two answers for one input:\n%s\n---\n%s", render(st), render(again))
		}
		for _, v := range st.virtualServers {
			a := v.vs.Address
			if !a.IsValid() || a.Is4In6() || v.vs.Port == 0 || v.vs.Protocol.Number() == 0 || !slices.Contains(Schedulers, v.vs.Scheduler) {
				t.Fatalf("virtual server the kernel cannot take: %+v", v.vs)
			}
			for _, r := range v.real {
				if familyOf(r.Address) != familyOf(a) || r.Address.Is4In6() || r.Port == 0 || r.Weight != 1 {
					t.Fatalf("real server the kernel cannot take: %+v in %s", r, a)
				}
			}
		}
		for _, a := range st.addresses {
			if ips := familyOf(a).set(setIPVSIPs); !slices.Contains(st.entries, setEntry{ips, ipset.Entry{IP: a}}) {
				t.Fatalf("address %s not in %s", a, ips)
			}
		}
		for _, e := range st.entries {
			fam, ok := family[e.set]
			if !ok {
				t.Fatalf("entry in an unknown set: %s", e)
			}
			for _, a := range []netip.Addr{e.entry.IP, e.entry.IP2, e.entry.Net.Addr()} {
				if a.IsValid() && (familyOf(a) != fam || a.Is4In6()) {
					t.Fatalf("entry of the wrong family for its set: %s", e)
				}
			}
		}
	})
}
