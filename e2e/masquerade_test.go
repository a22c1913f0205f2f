//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// TestMasqueradeDetectLocal: with --detect-local-mode=InterfaceNamePrefix
// (pods' links are kv…), a pod reaching a cluster IP is seen by the
// answering pod with its own address, while a host outside the cluster
// (link kx…) routed to the cluster IP is masqueraded. A pod that reaches
// itself through its Service (hairpin) is answered: without the loop-back
// masquerade its own address would come back to it and be dropped.
func TestMasqueradeDetectLocal(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "masq"
	mustNamespace(t, ns)
	a := mustPod(t, "masq-a", "10.244.37.1", true)
	pod := mustPod(t, "masq-pod", "10.244.37.2", false)
	host := mustPod(t, "masq-host", "192.168.37.2", false)
	// On this node: hairpin entries are for local endpoints.
	svc := framework.ClusterIPService(ns, "web", "10.96.37.10", framework.Port("", v1.ProtocolTCP, 80, 8080))
	slice := framework.Slice(ns, "web", "web-1", []discovery.EndpointPort{framework.SlicePort("", v1.ProtocolTCP, 8080)},
		framework.Endpoint(a.IP.String(), framework.NodeName, true))
	mustApply(t, svc, slice)
	vip := ap("10.96.37.10:80")
	waitAnswerSet(t, pod.HTTP, vip, "masq-a", 2, 30*time.Second)

	expectClientSeen(t, pod, vip, "masq-a")
	answer, err := host.Source(vip, 2*time.Second)
	if err != nil {
		t.Fatalf("a host outside the cluster cannot reach the cluster IP: %v", err)
	}
	if !strings.HasPrefix(answer, "masq-a ") || strings.HasSuffix(answer, " "+host.IP.String()) {
		t.Errorf("host outside the cluster: answer %q, want masq-a seeing another address than %s", answer, host.IP)
	}

	answer, err = a.Source(vip, 2*time.Second)
	if err != nil {
		t.Fatalf("hairpin: the pod cannot reach itself through its Service: %v", err)
	}
	if !strings.HasPrefix(answer, "masq-a ") || strings.HasSuffix(answer, " "+a.IP.String()) {
		t.Errorf("hairpin: answer %q, want masq-a seeing another address than its own", answer)
	}
}
