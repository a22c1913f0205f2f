//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// nodeAddress is the VM's own address on its network (eth0).
func nodeAddress(t *testing.T) netip.Addr {
	t.Helper()
	out, err := framework.Output("ip", "-4", "-o", "addr", "show", "dev", "eth0")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(out)
	if len(f) < 4 {
		t.Fatalf("no IPv4 address on eth0: %q", out)
	}
	return netip.MustParsePrefix(f[3]).Addr()
}

// nodePortService is Service ns/web of type NodePort, externalTrafficPolicy
// etp, on vip:80/TCP (node port tcp) and vip:53/UDP (node port udp), with
// the pods behind it: the first on this node, the others elsewhere.
func nodePortService(ns, vip string, etp v1.ServiceExternalTrafficPolicy, tcp, udp int32, pods ...*framework.Pod) (*v1.Service, *discovery.EndpointSlice) {
	svc := framework.ClusterIPService(ns, "web", vip, framework.Port("http", v1.ProtocolTCP, 80, 8080), framework.Port("dns", v1.ProtocolUDP, 53, 5353))
	svc.Spec.Type, svc.Spec.ExternalTrafficPolicy = v1.ServiceTypeNodePort, etp
	svc.Spec.Ports[0].NodePort, svc.Spec.Ports[1].NodePort = tcp, udp
	var eps []discovery.Endpoint
	for i, p := range pods {
		node := "other-node"
		if i == 0 {
			node = framework.NodeName
		}
		eps = append(eps, framework.Endpoint(p.IP.String(), node, true))
	}
	ports := []discovery.EndpointPort{framework.SlicePort("http", v1.ProtocolTCP, 8080), framework.SlicePort("dns", v1.ProtocolUDP, 5353)}
	return svc, framework.Slice(ns, "web", "web-1", ports, eps...)
}

// TestNodePortTraffic: a client outside the node (a namespace routed
// through the node, as a host on the node's network) reaches a NodePort
// Service on the node's address over TCP and UDP, masqueraded; an address
// added to the node serves the node port within a drift check, and stops
// serving it once removed.
func TestNodePortTraffic(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "nodeport"
	mustNamespace(t, ns)
	a, b := mustPod(t, "np-a", "10.244.30.1", true), mustPod(t, "np-b", "10.244.30.2", true)
	client := mustPod(t, "np-client", "192.168.30.2", false)
	svc, slice := nodePortService(ns, "10.96.30.10", v1.ServiceExternalTrafficPolicyCluster, 30180, 30153, a, b)
	mustApply(t, svc, slice)

	node := nodeAddress(t)
	waitAnswerSet(t, client.HTTP, netip.AddrPortFrom(node, 30180), "np-a,np-b", 12, 30*time.Second)
	waitAnswerSet(t, client.UDP, netip.AddrPortFrom(node, 30153), "np-a,np-b", 12, 30*time.Second)
	// externalTrafficPolicy Cluster: the pod sees the node, not the client.
	answer, err := client.Source(netip.AddrPortFrom(node, 30180), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(answer, " "+client.IP.String()) {
		t.Errorf("NodePort traffic with externalTrafficPolicy Cluster was not masqueraded: %q", answer)
	}

	// A new node address: served within a drift check (5 s here).
	extra := netip.MustParseAddr("10.250.30.1")
	if _, err := framework.Output("ip", "addr", "add", extra.String()+"/32", "dev", client.HostLink()); err != nil {
		t.Fatal(err)
	}
	removed := false
	remove := func() {
		if !removed {
			removed = true
			_, _ = framework.Output("ip", "addr", "del", extra.String()+"/32", "dev", client.HostLink())
		}
	}
	t.Cleanup(remove)
	took := waitAnswerSet(t, client.HTTP, netip.AddrPortFrom(extra, 30180), "np-a,np-b", 8, 30*time.Second)
	t.Logf("a new node address served its node port after %s", took.Round(100*time.Millisecond))

	remove()
	key := ipvs.Key{Address: extra, Protocol: ipvs.TCP, Port: 30180}
	eventually(t, "the removed address's virtual server deleted", 30*time.Second, func() error {
		if hasVirtualServer(t, key) {
			return fmt.Errorf("%s still programmed", key)
		}
		return nil
	})
	if !hasVirtualServer(t, ipvs.Key{Address: node, Protocol: ipvs.UDP, Port: 30153}) {
		t.Error("the node's other NodePort virtual servers went with the removed address")
	}
}

// TestNodePortLocal: externalTrafficPolicy Local sends a client outside the
// node only to the pod on this node, and that pod sees the client's own
// address.
func TestNodePortLocal(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "nodeport-local"
	mustNamespace(t, ns)
	here, there := mustPod(t, "npl-here", "10.244.31.1", true), mustPod(t, "npl-there", "10.244.31.2", true)
	client := mustPod(t, "npl-client", "192.168.31.2", false)
	svc, slice := nodePortService(ns, "10.96.31.10", v1.ServiceExternalTrafficPolicyLocal, 30181, 30154, here, there)
	mustApply(t, svc, slice)

	to := netip.AddrPortFrom(nodeAddress(t), 30181)
	waitAnswerSet(t, client.HTTP, to, "npl-here", 12, 30*time.Second)
	expectClientSeen(t, client, to, "npl-here")
	// The cluster IP still balances over every pod.
	waitAnswerSet(t, client.HTTP, ap("10.96.31.10:80"), "npl-here,npl-there", 12, 30*time.Second)
}
