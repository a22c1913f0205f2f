//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// TestLoadBalancer: a client inside a LoadBalancer's source ranges reaches
// its ingress IP, and one outside them is refused until the ranges take
// it in. With externalTrafficPolicy Local only the pod on this node
// answers, it sees the client's address, and the health check node port
// answers 200 with the count of local endpoints, 503 once there is none.
func TestLoadBalancer(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "loadbalancer"
	mustNamespace(t, ns)
	here, there := mustPod(t, "lb-here", "10.244.33.1", true), mustPod(t, "lb-there", "10.244.33.2", true)
	allowed := mustPod(t, "lb-allowed", "192.168.33.2", false)
	outside := mustPod(t, "lb-outside", "192.168.34.2", false)
	svc := framework.ClusterIPService(ns, "web", "10.96.33.10", framework.Port("", v1.ProtocolTCP, 80, 8080))
	svc.Spec.Type, svc.Spec.ExternalTrafficPolicy = v1.ServiceTypeLoadBalancer, v1.ServiceExternalTrafficPolicyLocal
	svc.Spec.Ports[0].NodePort, svc.Spec.HealthCheckNodePort = 30183, 30283
	svc.Spec.LoadBalancerSourceRanges = []string{"192.168.33.0/24"}
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.250.33.1"}}
	ports := []discovery.EndpointPort{framework.SlicePort("", v1.ProtocolTCP, 8080)}
	both := framework.Slice(ns, "web", "web-1", ports, framework.Endpoint(here.IP.String(), framework.NodeName, true),
		framework.Endpoint(there.IP.String(), "other-node", true))
	mustApply(t, svc, both)

	vip := ap("10.250.33.1:80")
	waitAnswerSet(t, allowed.HTTP, vip, "lb-here", 8, 30*time.Second)
	expectClientSeen(t, allowed, vip, "lb-here")
	if who, err := outside.HTTP(vip, 2*time.Second); err == nil {
		t.Errorf("a client outside the source ranges was answered by %s", who)
	}
	// The node is outside them too (KUBE-IPVS-OUT-FILTER).
	if who, err := framework.NodeHTTP(vip, 2*time.Second); err == nil {
		t.Errorf("the node, outside the source ranges, was answered by %s", who)
	}

	const check = "http://127.0.0.1:30283/healthz"
	healthCheck := func(code int, count string) func() error {
		return func() error {
			got, body := get(t, check)
			if got != code || !strings.Contains(body, `"localEndpoints": `+count) {
				return fmt.Errorf("health check answered %d %s; want %d with %s local endpoints", got, body, code, count)
			}
			return nil
		}
	}
	eventually(t, "health check with a local endpoint", 30*time.Second, healthCheck(200, "1"))
	mustApply(t, framework.Slice(ns, "web", "web-1", ports, framework.Endpoint(there.IP.String(), "other-node", true)))
	eventually(t, "health check without a local endpoint", 30*time.Second, healthCheck(503, "0"))

	// The ranges take the other client in: it is served.
	svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, "192.168.34.0/24")
	mustApply(t, svc, both)
	waitAnswerSet(t, outside.HTTP, vip, "lb-here", 4, 30*time.Second)

	// And the node: its rule alone is deleted, then appended again when
	// the ranges leave the node out once more.
	svc.Spec.LoadBalancerSourceRanges = append(svc.Spec.LoadBalancerSourceRanges, "10.0.2.0/24")
	mustApply(t, svc)
	waitAnswerSet(t, framework.NodeHTTP, vip, "lb-here", 4, 30*time.Second)
	svc.Spec.LoadBalancerSourceRanges = svc.Spec.LoadBalancerSourceRanges[:2]
	mustApply(t, svc)
	eventually(t, "the node refused again", 30*time.Second, func() error {
		if who, err := framework.NodeHTTP(vip, 2*time.Second); err == nil {
			return fmt.Errorf("the node, outside the source ranges, was answered by %s", who)
		}
		return nil
	})
	if n := strings.Count(ourIPTables(t), "--vaddr 10.250.33.1 "); n != 1 {
		t.Errorf("%d rules block the node from 10.250.33.1, want 1", n)
	}
}
