//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// TestExternalIPCannotTakeAClusterIP: a Service in a namespace that sorts
// first claims another Service's cluster IP and port as its external IP and
// its load-balancer ingress IP, with source ranges that would firewall the
// VIP for everyone. A client on the node keeps reaching the cluster IP's
// own pod throughout, whichever Service came first; the attacker gets a
// Warning naming the winner, and the conflict is counted.
func TestExternalIPCannotTakeAClusterIP(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const victimNS, attackerNS = "claims-victim", "aaa-claims"
	mustNamespace(t, victimNS)
	mustNamespace(t, attackerNS)
	victimPod := mustPod(t, "claims-victim", "10.244.47.1", true)
	evilPod := mustPod(t, "claims-evil", "10.244.47.66", true)
	vip := ap("10.96.47.10:80")

	evil, evilSlice := webService(attackerNS, "10.96.47.99", evilPod)
	evil.Spec.Type = v1.ServiceTypeLoadBalancer
	evil.Spec.ExternalIPs = []string{vip.Addr().String()}
	evil.Spec.LoadBalancerSourceRanges = []string{"203.0.113.1/32"}
	evil.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: vip.Addr().String()}}
	victim, victimSlice := webService(victimNS, vip.Addr().String(), victimPod)

	// The attacker's Service comes first, so the cluster IP is the second
	// claim, and the older Service is the attacker's.
	mustApply(t, evil, evilSlice)
	waitAnswerSet(t, framework.NodeHTTP, ap("10.96.47.99:80"), "claims-evil", 2, 30*time.Second)
	mustApply(t, victim, victimSlice)
	waitAnswerSet(t, framework.NodeHTTP, vip, "claims-victim", 4, 30*time.Second)

	var wrong sync.Map
	stop := clientLoop(50*time.Millisecond, func() error {
		answer, err := framework.NodeHTTP(vip, 2*time.Second)
		if err == nil && answer != "claims-victim" {
			wrong.Store(answer, true)
		}
		return err
	})
	// The attacker edits its Service while the client loops: each sync of
	// it must leave the cluster IP alone.
	for i := range 3 {
		evil.Labels = map[string]string{"edit": fmt.Sprint(i)}
		mustApply(t, evil)
		time.Sleep(2 * time.Second)
	}
	eventually(t, "the attacker is told who holds the address", 30*time.Second, func() error {
		events, err := env.Events(attackerNS)
		if err != nil {
			return err
		}
		for _, e := range events {
			if strings.Contains(e, victimNS+"/web") {
				return nil
			}
		}
		return fmt.Errorf("no Event naming %s/web among %q", victimNS, events)
	})
	if got := gauge(t, "kube_ipvs_proxy_conflicting_claims"); got < 1 {
		t.Errorf("conflicting claims gauge %v, want at least 1", got)
	}
	seen := stop()
	wrong.Range(func(k, _ any) bool {
		t.Errorf("the cluster IP was answered by %q", k)
		return true
	})
	if seen.failed != 0 {
		t.Errorf("%d of %d requests to the cluster IP failed; first: %v", seen.failed, seen.requests, seen.first)
	}
	t.Logf("%d requests to the cluster IP while another Service claimed it, %d failed", seen.requests, seen.failed)
}
