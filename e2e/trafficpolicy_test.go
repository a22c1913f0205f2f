//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestInternalTrafficPolicyLocal: a Service with internalTrafficPolicy
// Local is answered only by the pod on this node, by every pod once the
// policy is Cluster, and not at all when no pod is on this node, which the
// no-local-endpoints gauge counts.
func TestInternalTrafficPolicyLocal(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "itp"
	mustNamespace(t, ns)
	here, there := mustPod(t, "itp-here", "10.244.26.1", true), mustPod(t, "itp-there", "10.244.26.2", true)
	client := mustPod(t, "itp-client", "10.244.26.100", false)
	ports := []discovery.EndpointPort{framework.SlicePort("", v1.ProtocolTCP, 8080)}
	svc := framework.ClusterIPService(ns, "web", "10.96.26.10", framework.Port("", v1.ProtocolTCP, 80, 8080))
	svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	both := framework.Slice(ns, "web", "web-1", ports,
		framework.Endpoint(here.IP.String(), framework.NodeName, true),
		framework.Endpoint(there.IP.String(), "other-node", true))
	mustApply(t, svc, both)
	vip := ap("10.96.26.10:80")
	waitAnswerSet(t, client.HTTP, vip, "itp-here", 8, 30*time.Second)
	const noLocal = `kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="internal"}`
	before := gauge(t, noLocal) // other tests' Services, such as the oracle's

	svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyCluster)
	mustApply(t, svc)
	waitAnswerSet(t, client.HTTP, vip, "itp-here,itp-there", 12, 30*time.Second)

	// Back to Local with no pod on this node: no real server takes new
	// connections (the old ones drain at weight 0), and nobody answers.
	svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	mustApply(t, svc, framework.Slice(ns, "web", "web-1", ports, framework.Endpoint(there.IP.String(), "other-node", true)))
	eventually(t, "every real server at weight 0", 30*time.Second, func() error {
		rs, err := realServers(t, ipvs.Key{Address: vip.Addr(), Protocol: ipvs.TCP, Port: 80})
		if err != nil {
			return err
		}
		for _, r := range rs {
			if !strings.HasSuffix(r, "/0") {
				return fmt.Errorf("real servers %v", rs)
			}
		}
		return nil
	})
	if who, err := client.HTTP(vip, time.Second); err == nil {
		t.Fatalf("answered by %s with no endpoint on this node", who)
	}
	if n := gauge(t, noLocal); n != before+1 {
		t.Errorf("%s = %v, want %v", noLocal, n, before+1)
	}
}
