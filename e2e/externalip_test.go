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

// TestExternalIPs: a client outside the node reaches a Service on its
// external IPs: one the node takes on kube-ipvs0, and one that is the
// node's own address, which stays off kube-ipvs0. With
// externalTrafficPolicy Local only the pod on this node answers, and sees
// the client's address.
func TestExternalIPs(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "externalip"
	mustNamespace(t, ns)
	here, there := mustPod(t, "ext-here", "10.244.32.1", true), mustPod(t, "ext-there", "10.244.32.2", true)
	client := mustPod(t, "ext-client", "192.168.32.2", false)
	node := nodeAddress(t)
	bound := netip.MustParseAddr("10.250.32.1")
	ports := []discovery.EndpointPort{framework.SlicePort("", v1.ProtocolTCP, 8080)}
	endpoints := []discovery.Endpoint{framework.Endpoint(here.IP.String(), framework.NodeName, true),
		framework.Endpoint(there.IP.String(), "other-node", true)}
	// Port 8032 on the node's own address: no other test's node port.
	web := framework.ClusterIPService(ns, "web", "10.96.32.10", framework.Port("", v1.ProtocolTCP, 8032, 8080))
	web.Spec.ExternalIPs = []string{bound.String(), node.String()}
	local := framework.ClusterIPService(ns, "local", "10.96.32.11", framework.Port("", v1.ProtocolTCP, 80, 8080))
	local.Spec.Type, local.Spec.ExternalTrafficPolicy = v1.ServiceTypeNodePort, v1.ServiceExternalTrafficPolicyLocal
	local.Spec.Ports[0].NodePort = 30182
	local.Spec.ExternalIPs = []string{"10.250.32.2"}
	mustApply(t, web, framework.Slice(ns, "web", "web-1", ports, endpoints...),
		local, framework.Slice(ns, "local", "local-1", ports, endpoints...))

	waitAnswerSet(t, client.HTTP, netip.AddrPortFrom(bound, 8032), "ext-here,ext-there", 12, 30*time.Second)
	waitAnswerSet(t, client.HTTP, netip.AddrPortFrom(node, 8032), "ext-here,ext-there", 12, 30*time.Second)
	if !hasAddress(t, bound) {
		t.Errorf("external IP %s not bound to kube-ipvs0", bound)
	}
	if hasAddress(t, node) {
		t.Errorf("the node's own address %s was bound to kube-ipvs0", node)
	}
	if !hasVirtualServer(t, ipvs.Key{Address: node, Protocol: ipvs.TCP, Port: 8032}) {
		t.Errorf("no virtual server on the node's address for its external IP")
	}

	to := ap("10.250.32.2:80")
	waitAnswerSet(t, client.HTTP, to, "ext-here", 12, 30*time.Second)
	expectClientSeen(t, client, to, "ext-here")

	// The external IP dropped from the Service: it takes no new connection
	// at once, and drains (its connections here are in TIME_WAIT for two
	// minutes; TestLongLivedConnectionDrains shows the end of a drain).
	web.Spec.ExternalIPs = []string{node.String()}
	mustApply(t, web)
	eventually(t, "the dropped external IP takes no new connection", 30*time.Second, func() error {
		rs, err := realServers(t, ipvs.Key{Address: bound, Protocol: ipvs.TCP, Port: 8032})
		if err == nil && strings.Contains(strings.Join(rs, " "), "/1") {
			return fmt.Errorf("%s real servers %v", bound, rs)
		}
		return nil
	})
	if answer, err := client.HTTP(netip.AddrPortFrom(bound, 8032), time.Second); err == nil {
		t.Errorf("the dropped external IP answered %q", answer)
	}
}
