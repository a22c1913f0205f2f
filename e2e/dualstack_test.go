//go:build e2e

package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
)

// dualStackPod is a pod with an IPv4 and an IPv6 address.
func dualStackPod(t *testing.T, name, ip4, ip6 string, serve bool) *framework.Pod {
	t.Helper()
	p := mustPod(t, name, ip4, serve)
	if err := p.AddIPv6(mustAddr(ip6)); err != nil {
		t.Fatal(err)
	}
	return p
}

// slices6 are the IPv4 and IPv6 EndpointSlices of Service svc, one
// endpoint per pod and family, the first pod on this node.
func slices6(ns, svc string, ports []discovery.EndpointPort, pods ...*framework.Pod) (*discovery.EndpointSlice, *discovery.EndpointSlice) {
	var eps4, eps6 []discovery.Endpoint
	for i, p := range pods {
		node := "other-node"
		if i == 0 {
			node = framework.NodeName
		}
		eps4 = append(eps4, framework.Endpoint(p.IP.String(), node, true))
		eps6 = append(eps6, framework.Endpoint(p.IP6.String(), node, true))
	}
	s6 := framework.Slice(ns, svc, svc+"-v6", ports, eps6...)
	s6.AddressType = discovery.AddressTypeIPv6
	return framework.Slice(ns, svc, svc+"-v4", ports, eps4...), s6
}

// TestDualStack: a dual-stack NodePort Service answers on both cluster IPs
// and, from a client outside the node, on the node's IPv6 address
// (masqueraded); an IPv6-only Service answers a pod reaching itself
// through it (hairpin); the IPv6 state is in the KUBE-6- sets and in
// ip6tables, beside the IPv4 state.
func TestDualStack(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "dualstack"
	mustNamespace(t, ns)
	a := dualStackPod(t, "ds-a", "10.244.42.1", "fd00:10:244:42::1", true)
	b := dualStackPod(t, "ds-b", "10.244.42.2", "fd00:10:244:42::2", true)
	client := dualStackPod(t, "ds-client", "10.244.42.10", "fd00:10:244:42::10", false)
	outside := dualStackPod(t, "ds-outside", "192.168.42.2", "fd00:192:168:42::2", false)

	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	dual := framework.ClusterIPService(ns, "dual", "10.96.42.10", framework.Port("http", tcp, 80, 8080), framework.Port("dns", udp, 53, 5353))
	dual.Spec.ClusterIPs = []string{"10.96.42.10", "fd00:10:96::4210"}
	dual.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	dual.Spec.Type = v1.ServiceTypeNodePort
	dual.Spec.Ports[0].NodePort, dual.Spec.Ports[1].NodePort = 30186, 30156
	ports := []discovery.EndpointPort{framework.SlicePort("http", tcp, 8080), framework.SlicePort("dns", udp, 5353)}
	dual4, dual6 := slices6(ns, "dual", ports, a, b)
	only6 := framework.ClusterIPService(ns, "only6", "fd00:10:96::4211", framework.Port("", tcp, 80, 8080))
	only6.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	_, only6A := slices6(ns, "only6", []discovery.EndpointPort{framework.SlicePort("", tcp, 8080)}, a)
	mustApply(t, dual, dual4, dual6, only6, only6A)

	vip4, vip6 := netip.MustParseAddr("10.96.42.10"), netip.MustParseAddr("fd00:10:96::4210")
	waitAnswerSet(t, client.HTTP, netip.AddrPortFrom(vip6, 80), "ds-a,ds-b", 12, 30*time.Second)
	waitAnswerSet(t, client.UDP, netip.AddrPortFrom(vip6, 53), "ds-a,ds-b", 12, 30*time.Second)
	waitAnswerSet(t, client.HTTP, netip.AddrPortFrom(vip4, 80), "ds-a,ds-b", 12, 30*time.Second)

	// A pod reaching itself through a Service: masqueraded back to it
	// by KUBE-6-LOOP-BACK in ip6tables, or the answer never arrives.
	waitAnswerSet(t, a.HTTP, ap("[fd00:10:96::4211]:80"), "ds-a", 4, 30*time.Second)

	// The node's IPv6 address serves the node ports, from outside.
	node6 := netip.MustParseAddr("fd00:0:42::15")
	if _, err := framework.Output("ip", "addr", "add", node6.String()+"/128", "dev", outside.HostLink(), "nodad"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = framework.Output("ip", "addr", "del", node6.String()+"/128", "dev", outside.HostLink()) })
	waitAnswerSet(t, outside.HTTP, netip.AddrPortFrom(node6, 30186), "ds-a,ds-b", 12, 30*time.Second)
	waitAnswerSet(t, outside.UDP, netip.AddrPortFrom(node6, 30156), "ds-a,ds-b", 12, 30*time.Second)
	answer, err := outside.Source(netip.AddrPortFrom(node6, 30186), 2*time.Second)
	if err != nil || strings.HasSuffix(answer, " "+outside.IP6.String()) {
		t.Errorf("IPv6 NodePort traffic with externalTrafficPolicy Cluster was not masqueraded: %q, %v", answer, err)
	}

	for _, c := range []struct {
		set string
		e   ipset.Entry
	}{
		{"KUBE-6-CLUSTER-IP", ipset.Entry{IP: vip6, Protocol: ipset.EntryTCP, Port: 80}},
		{"KUBE-6-LOOP-BACK", ipset.Entry{IP: a.IP6, Protocol: ipset.EntryTCP, Port: 8080, IP2: a.IP6}},
		{"KUBE-6-NODE-PORT-TCP", ipset.Entry{Port: 30186}},
		{"KUBE-CLUSTER-IP", ipset.Entry{IP: vip4, Protocol: ipset.EntryTCP, Port: 80}},
	} {
		if !hasEntry(t, c.set, c.e) {
			t.Errorf("%s has no entry %s", c.set, c.e)
		}
	}
	if hasEntry(t, "KUBE-CLUSTER-IP", ipset.Entry{IP: vip6, Protocol: ipset.EntryTCP, Port: 80}) {
		t.Error("an IPv6 entry in an IPv4 set")
	}
	for _, addr := range []netip.Addr{vip4, vip6, mustAddr("fd00:10:96::4211")} {
		if !hasAddress(t, addr) {
			t.Errorf("%s not bound to kube-ipvs0", addr)
		}
	}
	saved, err := framework.Output("ip6tables-save")
	if err != nil {
		t.Fatal(err)
	}
	for _, rule := range []string{
		"-A KUBE-POSTROUTING -m comment --comment \"Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose\" -m set --match-set KUBE-6-LOOP-BACK dst,dst,src -j MASQUERADE",
		"-A KUBE-NODE-PORT -p tcp -m comment --comment \"Kubernetes nodeport TCP port for masquerade purpose\" -m set --match-set KUBE-6-NODE-PORT-TCP dst -j KUBE-MARK-MASQ",
	} {
		if !strings.Contains(saved, rule) {
			t.Errorf("ip6tables lacks %s", rule)
		}
	}

}
