//go:build e2e

package e2e

import (
	"net/netip"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// TestSCTPTraffic: SCTP associations reach every pod of a Service through its
// cluster IP, and a host outside the node reaches it through its node port.
func TestSCTPTraffic(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "sctp"
	mustNamespace(t, ns)
	a, b := mustPod(t, "sctp-a", "10.244.39.1", true), mustPod(t, "sctp-b", "10.244.39.2", true)
	client := mustPod(t, "sctp-client", "10.244.39.100", false)
	host := mustPod(t, "sctp-host", "192.168.39.2", false)
	svc := framework.ClusterIPService(ns, "assoc", "10.96.39.10", framework.Port("", v1.ProtocolSCTP, 9, 9009))
	svc.Spec.Type = v1.ServiceTypeNodePort
	svc.Spec.Ports[0].NodePort = 30185
	slice := framework.Slice(ns, "assoc", "assoc-1", []discovery.EndpointPort{framework.SlicePort("", v1.ProtocolSCTP, 9009)},
		framework.Endpoint(a.IP.String(), framework.NodeName, true), framework.Endpoint(b.IP.String(), "other-node", true))
	mustApply(t, svc, slice)

	waitAnswerSet(t, client.SCTP, ap("10.96.39.10:9"), "sctp-a,sctp-b", 12, 30*time.Second)
	waitAnswerSet(t, host.SCTP, netip.AddrPortFrom(nodeAddress(t), 30185), "sctp-a,sctp-b", 12, 30*time.Second)
}
