//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// oracleObjects are ClusterIP Services with the odd but valid inputs a
// drop-in must handle exactly as upstream does.
func oracleObjects() []any {
	const ns, node = "oracle", framework.NodeName
	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	web := framework.ClusterIPService(ns, "web", "10.96.10.10",
		framework.Port("http", tcp, 80, 8080), framework.Port("dns", udp, 53, 5353))
	sticky := framework.ClusterIPService(ns, "sticky", "10.96.10.11", framework.Port("", tcp, 81, 8081))
	sticky.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	shortSticky := framework.ClusterIPService(ns, "short-sticky", "10.96.10.12", framework.Port("", tcp, 82, 8082))
	shortSticky.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	shortSticky.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](300)}}
	empty := framework.ClusterIPService(ns, "no-endpoints", "10.96.10.13", framework.Port("", tcp, 83, 8083))
	headless := framework.ClusterIPService(ns, "headless", v1.ClusterIPNone, framework.Port("", tcp, 84, 8084))
	other := framework.ClusterIPService(ns, "other-proxy", "10.96.10.15", framework.Port("", tcp, 85, 8085))
	other.Labels = map[string]string{"service.kubernetes.io/service-proxy-name": "someone-else"}
	external := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "external"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeExternalName, ExternalName: "example.invalid"}}

	webPorts := []discovery.EndpointPort{framework.SlicePort("http", tcp, 8080), framework.SlicePort("dns", udp, 5353),
		framework.SlicePort("no-such-service-port", tcp, 9999)}
	noConditions := discovery.Endpoint{Addresses: []string{"10.244.0.6"}, NodeName: ptr.To("other-node")}
	terminating := discovery.Endpoint{Addresses: []string{"10.244.0.8"},
		Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}}
	webA := framework.Slice(ns, "web", "web-a", webPorts,
		framework.Endpoint("10.244.0.5", node, true),
		noConditions,
		framework.Endpoint("10.244.0.7", "", false),
		terminating,
		framework.Endpoint("10.244.0.10", "", false),
		framework.Endpoint("10.244.0.11", node, false))
	// The same addresses again, with the same readiness: listed twice,
	// programmed once. (Not with conflicting readiness: upstream then keeps
	// whichever slice its map iteration meets first, at random; we keep the
	// first slice by name — unit-tested in proxier.)
	webB := framework.Slice(ns, "web", "web-b", []discovery.EndpointPort{framework.SlicePort("http", tcp, 8080)},
		framework.Endpoint("10.244.0.6", "other-node", true),
		framework.Endpoint("10.244.0.10", "", false),
		framework.Endpoint("10.244.0.9", "", true))
	stickyA := framework.Slice(ns, "sticky", "sticky-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8081)},
		discovery.Endpoint{Addresses: []string{"10.244.1.5"}, NodeName: ptr.To(node),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}})
	shortA := framework.Slice(ns, "short-sticky", "short-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8082)},
		framework.Endpoint("10.244.1.6", "", true), framework.Endpoint("10.244.1.7", "", true))
	otherA := framework.Slice(ns, "other-proxy", "other-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8085)},
		framework.Endpoint("10.244.1.8", "", true))
	otherA.Labels["service.kubernetes.io/service-proxy-name"] = "someone-else"
	// internalTrafficPolicy: Local, with a local endpoint among remote ones,
	// and with remote ones alone (no real server: traffic dropped).
	localOnly := framework.ClusterIPService(ns, "local-only", "10.96.10.16", framework.Port("", tcp, 86, 8086))
	localOnly.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	noLocal := framework.ClusterIPService(ns, "no-local", "10.96.10.17", framework.Port("", tcp, 87, 8087))
	noLocal.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	localOnlyA := framework.Slice(ns, "local-only", "local-only-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8086)},
		framework.Endpoint("10.244.1.9", node, true), framework.Endpoint("10.244.1.10", "other-node", true))
	noLocalA := framework.Slice(ns, "no-local", "no-local-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8087)},
		framework.Endpoint("10.244.1.11", "other-node", true))
	// NodePorts on every node address (10.0.2.15 here): TCP and UDP with
	// externalTrafficPolicy Cluster, SCTP, and Local with and without a
	// local endpoint; internalTrafficPolicy Local on a NodePort, whose
	// cluster IP then falls back to remote endpoints (upstream's rule).
	sctp := v1.ProtocolSCTP
	nodePort := func(name, ip string, etp v1.ServiceExternalTrafficPolicy, ports ...v1.ServicePort) *v1.Service {
		s := framework.ClusterIPService(ns, name, ip, ports...)
		s.Spec.Type, s.Spec.ExternalTrafficPolicy = v1.ServiceTypeNodePort, etp
		return s
	}
	withNodePort := func(p v1.ServicePort, n int32) v1.ServicePort { p.NodePort = n; return p }
	cluster, local := v1.ServiceExternalTrafficPolicyCluster, v1.ServiceExternalTrafficPolicyLocal
	np := nodePort("np", "10.96.10.18", cluster, withNodePort(framework.Port("http", tcp, 88, 8088), 30088),
		withNodePort(framework.Port("dns", udp, 53, 5353), 30053))
	npSCTP := nodePort("np-sctp", "10.96.10.19", cluster, withNodePort(framework.Port("", sctp, 9, 9009), 30009))
	npLocal := nodePort("np-local", "10.96.10.20", local, withNodePort(framework.Port("", tcp, 89, 8089), 30089))
	npNoLocal := nodePort("np-no-local", "10.96.10.21", local, withNodePort(framework.Port("", udp, 90, 8090), 30090))
	npITP := nodePort("np-itp", "10.96.10.22", cluster, withNodePort(framework.Port("", tcp, 91, 8091), 30091))
	npITP.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	npA := framework.Slice(ns, "np", "np-a", []discovery.EndpointPort{framework.SlicePort("http", tcp, 8088), framework.SlicePort("dns", udp, 5353)},
		framework.Endpoint("10.244.1.12", node, true), framework.Endpoint("10.244.1.13", "other-node", true))
	npSCTPA := framework.Slice(ns, "np-sctp", "np-sctp-a", []discovery.EndpointPort{framework.SlicePort("", sctp, 9009)},
		framework.Endpoint("10.244.1.14", "other-node", true))
	npLocalA := framework.Slice(ns, "np-local", "np-local-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8089)},
		framework.Endpoint("10.244.1.15", node, true), framework.Endpoint("10.244.1.16", "other-node", true))
	npNoLocalA := framework.Slice(ns, "np-no-local", "np-no-local-a", []discovery.EndpointPort{framework.SlicePort("", udp, 8090)},
		framework.Endpoint("10.244.1.17", "other-node", true))
	npITPA := framework.Slice(ns, "np-itp", "np-itp-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8091)},
		framework.Endpoint("10.244.1.18", "other-node", true))
	// External IPs: one bound to kube-ipvs0, one the node's own (not
	// bound); and on a NodePort with externalTrafficPolicy Local.
	ext := framework.ClusterIPService(ns, "ext", "10.96.10.23", framework.Port("", tcp, 92, 8092))
	ext.Spec.ExternalIPs = []string{"192.0.2.50", "10.0.2.15"}
	extLocal := nodePort("ext-local", "10.96.10.24", local, withNodePort(framework.Port("", tcp, 93, 8093), 30093))
	extLocal.Spec.ExternalIPs = []string{"192.0.2.51"}
	extA := framework.Slice(ns, "ext", "ext-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8092)},
		framework.Endpoint("10.244.1.19", "other-node", true))
	extLocalA := framework.Slice(ns, "ext-local", "ext-local-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8093)},
		framework.Endpoint("10.244.1.20", node, true), framework.Endpoint("10.244.1.21", "other-node", true))
	// LoadBalancers: source ranges that hold the node (10.0.2.15), and
	// externalTrafficPolicy Local with ranges that leave it out, a health
	// check node port and an ipMode Proxy ingress (not programmed); one
	// without node ports.
	loadBalancer := func(name, ip string, etp v1.ServiceExternalTrafficPolicy, ranges []string, p v1.ServicePort, ingress ...v1.LoadBalancerIngress) *v1.Service {
		s := framework.ClusterIPService(ns, name, ip, p)
		s.Spec.Type, s.Spec.ExternalTrafficPolicy, s.Spec.LoadBalancerSourceRanges = v1.ServiceTypeLoadBalancer, etp, ranges
		s.Status.LoadBalancer.Ingress = ingress
		return s
	}
	proxyMode := v1.LoadBalancerIPModeProxy
	lb := loadBalancer("lb", "10.96.10.25", cluster, []string{"10.0.2.0/24", "192.168.40.0/24"},
		withNodePort(framework.Port("", tcp, 94, 8094), 30094), v1.LoadBalancerIngress{IP: "192.0.2.60"})
	lbLocal := loadBalancer("lb-local", "10.96.10.26", local, []string{"192.168.41.0/24"},
		withNodePort(framework.Port("", tcp, 95, 8095), 30095),
		v1.LoadBalancerIngress{IP: "192.0.2.61"}, v1.LoadBalancerIngress{IP: "192.0.2.62", IPMode: &proxyMode})
	lbLocal.Spec.HealthCheckNodePort = 30295
	lbNoNodePorts := loadBalancer("lb-no-node-ports", "10.96.10.27", cluster, nil, framework.Port("", udp, 96, 8096),
		v1.LoadBalancerIngress{IP: "192.0.2.63"})
	lbNoNodePorts.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
	lbA := framework.Slice(ns, "lb", "lb-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8094)},
		framework.Endpoint("10.244.1.22", "other-node", true))
	lbLocalA := framework.Slice(ns, "lb-local", "lb-local-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8095)},
		framework.Endpoint("10.244.1.23", node, true), framework.Endpoint("10.244.1.24", "other-node", true))
	lbNoNodePortsA := framework.Slice(ns, "lb-no-node-ports", "lb-no-node-ports-a", []discovery.EndpointPort{framework.SlicePort("", udp, 8096)},
		framework.Endpoint("10.244.1.25", "other-node", true))
	// Topology hints, the node in zone-a (see TestSameKernelStateAsUpstream):
	// zone hints on every endpoint; on some only (ignored); node hints.
	hinted := func(ip, node string, zones, nodes []string) discovery.Endpoint {
		e := framework.Endpoint(ip, node, true)
		e.Hints = &discovery.EndpointHints{}
		for _, z := range zones {
			e.Hints.ForZones = append(e.Hints.ForZones, discovery.ForZone{Name: z})
		}
		for _, n := range nodes {
			e.Hints.ForNodes = append(e.Hints.ForNodes, discovery.ForNode{Name: n})
		}
		return e
	}
	topo := framework.ClusterIPService(ns, "topo", "10.96.10.28", framework.Port("", tcp, 97, 8097))
	topoPartial := framework.ClusterIPService(ns, "topo-partial", "10.96.10.29", framework.Port("", tcp, 98, 8098))
	topoNode := framework.ClusterIPService(ns, "topo-node", "10.96.10.30", framework.Port("", tcp, 99, 8099))
	topoA := framework.Slice(ns, "topo", "topo-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8097)},
		hinted("10.244.1.26", "other-node", []string{"zone-a"}, nil), hinted("10.244.1.27", "other-node", []string{"zone-b"}, nil))
	topoPartialA := framework.Slice(ns, "topo-partial", "topo-partial-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8098)},
		hinted("10.244.1.28", "other-node", []string{"zone-a"}, nil), framework.Endpoint("10.244.1.29", "other-node", true))
	topoNodeA := framework.Slice(ns, "topo-node", "topo-node-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8099)},
		hinted("10.244.1.30", node, []string{"zone-a"}, []string{node}), hinted("10.244.1.31", "other-node", []string{"zone-a"}, []string{"other-node"}))
	return append(oracleDualStack(), web, sticky, shortSticky, empty, headless, other, external, webA, webB, stickyA, shortA, otherA,
		topo, topoPartial, topoNode, topoA, topoPartialA, topoNodeA,
		lb, lbLocal, lbNoNodePorts, lbA, lbLocalA, lbNoNodePortsA,
		localOnly, noLocal, localOnlyA, noLocalA,
		np, npSCTP, npLocal, npNoLocal, npITP, npA, npSCTPA, npLocalA, npNoLocalA, npITPA,
		ext, extLocal, extA, extLocalA)
}

// oracleNode6 is an IPv6 address the oracle gives the node, for IPv6
// NodePorts.
const oracleNode6 = "fd00:0:2::15"

// oracleDualStack are IPv6 and dual-stack Services (node ports clear of
// the other tests', which run later on the same apiserver): a dual-stack NodePort
// (TCP, UDP, SCTP) with an IPv6 external IP and a local endpoint (hairpin),
// and an IPv6-only LoadBalancer with IPv6 source ranges and
// externalTrafficPolicy Local.
func oracleDualStack() []any {
	const ns, node = "oracle", framework.NodeName
	tcp, udp, sctp := v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP
	withNodePort := func(p v1.ServicePort, n int32) v1.ServicePort { p.NodePort = n; return p }
	dual := framework.ClusterIPService(ns, "dual", "10.96.10.31", withNodePort(framework.Port("http", tcp, 80, 8080), 30096),
		withNodePort(framework.Port("dns", udp, 53, 5353), 30056), withNodePort(framework.Port("sctp", sctp, 9, 9009), 30010))
	dual.Spec.Type = v1.ServiceTypeNodePort
	dual.Spec.ClusterIPs = []string{"10.96.10.31", "fd00:10:96::1031"}
	dual.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	dual.Spec.ExternalIPs = []string{"2001:db8::50"}
	ports := []discovery.EndpointPort{framework.SlicePort("http", tcp, 8080), framework.SlicePort("dns", udp, 5353), framework.SlicePort("sctp", sctp, 9009)}
	dual4 := framework.Slice(ns, "dual", "dual-v4", ports, framework.Endpoint("10.244.1.40", node, true), framework.Endpoint("10.244.1.41", "other-node", true))
	dual6 := framework.Slice(ns, "dual", "dual-v6", ports, framework.Endpoint("fd00:10:244:1::40", node, true), framework.Endpoint("fd00:10:244:1::41", "other-node", true))
	dual6.AddressType = discovery.AddressTypeIPv6

	lb6 := framework.ClusterIPService(ns, "lb6", "fd00:10:96::1032", withNodePort(framework.Port("", tcp, 80, 8080), 30097))
	lb6.Spec.Type, lb6.Spec.ExternalTrafficPolicy = v1.ServiceTypeLoadBalancer, v1.ServiceExternalTrafficPolicyLocal
	lb6.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	lb6.Spec.LoadBalancerSourceRanges = []string{"2001:db8:41::/48"}
	lb6.Spec.HealthCheckNodePort = 30297
	lb6.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "2001:db8::60"}}
	lb6A := framework.Slice(ns, "lb6", "lb6-a", []discovery.EndpointPort{framework.SlicePort("", tcp, 8080)},
		framework.Endpoint("fd00:10:244:1::42", node, true), framework.Endpoint("fd00:10:244:1::43", "other-node", true))
	lb6A.AddressType = discovery.AddressTypeIPv6
	return []any{dual, dual4, dual6, lb6, lb6A}
}

// TestSameKernelStateAsUpstream runs upstream kube-proxy (v1.37) in IPVS mode
// and then kube-ipvs-proxy against the same objects on the same (cleaned)
// kernel, and requires the same IPVS table, ipsets, kube-ipvs0 addresses and
// iptables rules.
func TestSameKernelStateAsUpstream(t *testing.T) {
	mustNamespace(t, "oracle")
	setZone(t, "zone-a")
	if _, err := framework.Output("ip", "addr", "add", oracleNode6+"/64", "dev", "eth0", "nodad"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = framework.Output("ip", "addr", "del", oracleNode6+"/64", "dev", "eth0") })
	mustApply(t, oracleObjects()...)
	if shared != nil {
		if err := shared.Stop(); err != nil {
			t.Fatal(err)
		}
		replaceProxier(t, nil)
	}
	if err := framework.CleanKernel(); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	up, err := framework.StartUpstream(env, "kube-proxy-upstream", ruleFlags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = up.Stop() })
	if err := framework.WaitSynced(up, start, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	want, err := settledState(t, up)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("upstream kube-proxy synced in %s", time.Since(start).Round(time.Millisecond))
	wantListeners, err := framework.NodePortListeners()
	if err != nil {
		t.Fatal(err)
	}
	if err := up.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := framework.CleanKernel(); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	ourProxier(t)
	t.Logf("kube-ipvs-proxy synced in %s", time.Since(start).Round(time.Millisecond))
	got, err := framework.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	gotListeners, err := framework.NodePortListeners()
	if err != nil {
		t.Fatal(err)
	}
	// Both states are kept with the logs, to read when they differ.
	for name, st := range map[string]framework.State{"upstream": want, "ours": got} {
		text := strings.Join([]string{st.IPVS, st.IPSets, st.Addresses, st.IPTables, st.IP6Tables}, "\n")
		_ = os.WriteFile(filepath.Join(env.Artifacts, "oracle-"+name+".txt"), []byte(text), 0o644)
	}
	if !strings.Contains(want.IPVS, "10.96.10.10:80") || !strings.Contains(want.IPVS, "10.0.2.15:30088") ||
		!strings.Contains(want.IPVS, "[fd00:10:96::1031]:80") || !strings.Contains(want.IPVS, "["+oracleNode6+"]:30096") {
		t.Fatalf("upstream did not program the test services; its state:\n%s", want.IPVS)
	}
	if !strings.Contains(wantListeners, ":30295") || !strings.Contains(wantListeners, ":30297") {
		t.Fatalf("upstream serves no health check of the test services; its listeners:\n%s", wantListeners)
	}
	for _, c := range []struct{ what, want, got string }{
		{"ipvsadm -Sn", want.IPVS, got.IPVS},
		{"ipset save", want.IPSets, got.IPSets},
		{"kube-ipvs0 addresses", want.Addresses, got.Addresses},
		{"iptables-save", want.IPTables, got.IPTables},
		{"ip6tables-save", want.IP6Tables, got.IP6Tables},
		{"health-check node port listeners", wantListeners, gotListeners},
	} {
		if c.want != c.got {
			t.Errorf("%s differs from upstream kube-proxy's\n%s", c.what, lineDiff(c.want, c.got))
		}
	}

	// --ipvs-vip-mode=local-route: the same virtual servers and sets; each
	// Service CIDR is one route instead of an address per cluster IP.
	stopShared(t)
	if err := framework.CleanKernel(); err != nil {
		t.Fatal(err)
	}
	routed := startSynced(t, func() (*framework.Process, error) {
		return framework.StartOurs(env, "kube-ipvs-proxy-localroute", slices.Concat(ruleFlags, []string{"--ipvs-vip-mode=local-route"})...)
	})
	gotRouted, err := framework.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	serviceCIDRs := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")}
	var unrouted []string
	for _, l := range strings.Split(want.Addresses, "\n") {
		_, addr, _ := strings.Cut(l, " ")
		p, err := netip.ParsePrefix(addr)
		if err != nil || !slices.ContainsFunc(serviceCIDRs, func(c netip.Prefix) bool { return c.Contains(p.Addr()) }) {
			unrouted = append(unrouted, l)
		}
	}
	for _, c := range []struct{ what, want, got string }{
		{"ipvsadm -Sn", want.IPVS, gotRouted.IPVS},
		{"ipset save", want.IPSets, gotRouted.IPSets},
		{"kube-ipvs0 addresses", strings.Join(unrouted, "\n"), gotRouted.Addresses},
	} {
		if c.want != c.got {
			t.Errorf("local-route mode: %s differs from upstream kube-proxy's (cluster IPs of %v aside)\n%s", c.what, serviceCIDRs, lineDiff(c.want, c.got))
		}
	}
	if err := routed.Stop(); err != nil {
		t.Fatal(err)
	}
}

// setZone labels this node with a topology zone.
func setZone(t *testing.T, zone string) {
	t.Helper()
	ctx, cancel := framework.Ctx()
	defer cancel()
	nodes := env.Admin.CoreV1().Nodes()
	n, err := nodes.Get(ctx, framework.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[v1.LabelTopologyZone] = zone
	if _, err := nodes.Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// settledState waits until upstream has finished: in dual-stack mode (which
// upstream picks on any kernel with IPv6) each family syncs on its own and
// sets its own ip_family series of the sync timestamp at the very end, so
// the state is read once both series are there and three reads a second
// apart are the same. Upstream's state can go on changing after both
// families synced: on a slow day in the emulated VM, for over a minute more
// (a rollback settled 2m3s and 2m16s after its first sync report), so the
// wait is four minutes.
func settledState(t *testing.T, up *framework.Process) (framework.State, error) {
	t.Helper()
	var last framework.State
	same, start, families := 0, time.Now(), time.Duration(0)
	err := framework.Eventually(4*time.Minute, time.Second, func() error {
		log, _ := os.ReadFile(up.LogPath)
		if strings.Contains(string(log), "dual-stack mode") {
			if n, err := familiesSynced(); err != nil || n < 2 {
				same = 0
				return fmt.Errorf("upstream has synced %d IP families of 2 (%v)", n, err)
			}
		}
		if families == 0 {
			families = time.Since(start)
		}
		st, err := framework.ReadState()
		if err != nil {
			return err
		}
		if st == last {
			same++
		} else {
			same = 0
		}
		last = st
		if same < 3 {
			return fmt.Errorf("upstream state still changing")
		}
		return nil
	})
	t.Logf("%s settled %s after its first sync report (every IP family had synced after %s)",
		up.Name, time.Since(start).Round(time.Second), families.Round(time.Second))
	return last, err
}

// familiesSynced counts the ip_family series of kube-proxy's last sync
// timestamp: a family has one once its first sync is done.
func familiesSynced() (int, error) {
	all, err := framework.Scrape()
	n := 0
	for k := range all {
		if strings.HasPrefix(k, "kubeproxy_sync_proxy_rules_last_timestamp_seconds{") && strings.Contains(k, "ip_family=") {
			n++
		}
	}
	return n, err
}

// lineDiff lists the lines only upstream has (-) and only we have (+).
func lineDiff(want, got string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	var b strings.Builder
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			b.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			b.WriteString("+ " + l + "\n")
		}
	}
	return b.String()
}
