//go:build e2e

package multinode

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// TestExternalTrafficPolicyAcrossNodes sends requests from outside every
// node to each node's NodePorts while the one echo pod is on one node,
// then moves it. With externalTrafficPolicy Local only the pod's node
// answers, and the pod sees the client's own address; the health-check
// node port says 200 and one local endpoint there and 503 elsewhere, and
// follows the pod within 25 s, inside the 30 s periodic sync, so a proxier
// that only caught up on that would fail; the test logs how long it took
// (ours well under a second, upstream about 10 s in the VM). With Cluster
// every node answers, forwarding to the pod's node as itself (masqueraded).
func TestExternalTrafficPolicyAcrossNodes(t *testing.T) {
	ctx, cancel := framework.Ctx()
	defer cancel()
	local, err := env.Admin.CoreV1().Services("multinode").Get(ctx, "local", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := env.Admin.CoreV1().Services("multinode").Get(ctx, "cluster", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	localPort, clusterPort := uint16(local.Spec.Ports[0].NodePort), uint16(cluster.Spec.Ports[0].NodePort)
	hcPort := uint16(local.Spec.HealthCheckNodePort)
	if hcPort == 0 {
		t.Fatal("Service local has no healthCheckNodePort")
	}
	defer placeEcho(t, framework.BedNodeName(1))
	for _, at := range []string{framework.BedNodeName(1), framework.BedNodeName(2)} {
		pod := placeEcho(t, at)
		moved := time.Now()
		for _, n := range bed.Nodes {
			status, endpoints := http.StatusServiceUnavailable, 0
			if n.Name == at {
				status, endpoints = http.StatusOK, 1
			}
			if err := framework.Eventually(25*time.Second, 200*time.Millisecond, func() error {
				return healthIs(netip.AddrPortFrom(n.IP, hcPort), status, endpoints)
			}); err != nil {
				t.Fatalf("pod on %s: health check of %s: %v", at, n.Name, err)
			}
		}
		t.Logf("pod on %s: every node's health check right %s after the rollout", at, time.Since(moved).Round(100*time.Millisecond))
		for _, n := range bed.Nodes {
			got, err := framework.OutsideGet(netip.AddrPortFrom(n.IP, localPort), "/source", 3*time.Second)
			switch {
			case n.Name == at && (err != nil || got != pod+" "+framework.SegmentGateway.String()):
				t.Errorf("Local NodePort on %s, the pod's node: got %q, %v; want %s seeing the client %s", n.Name, got, err, pod, framework.SegmentGateway)
			case n.Name != at && err == nil:
				t.Errorf("Local NodePort on %s, a node without the pod: answered %q", n.Name, got)
			}
			got, err = framework.OutsideGet(netip.AddrPortFrom(n.IP, clusterPort), "/source", 3*time.Second)
			if err != nil || !strings.HasPrefix(got, pod+" ") {
				t.Errorf("Cluster NodePort on %s: got %q, %v; want an answer from %s", n.Name, got, err, pod)
			} else if n.Name != at && got != pod+" "+n.IP.String() {
				t.Errorf("Cluster NodePort on %s: the pod saw %q; want the forwarding node's address %s", n.Name, got, n.IP)
			}
		}
	}
}

// placeEcho moves the echo Deployment's pod to node and returns its name
// once it is the only pod and ready.
func placeEcho(t *testing.T, node string) string {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"nodeSelector":{"kubernetes.io/hostname":%q}}}}}`, node)
	if _, err := env.Kubectl("-n", "multinode", "patch", "deployment/echo", "-p", patch); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitRollout("multinode", "deployment/echo", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	var name string
	if err := framework.Eventually(time.Minute, time.Second, func() error {
		ctx, cancel := framework.Ctx()
		defer cancel()
		pods, err := env.Admin.CoreV1().Pods("multinode").List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || pods.Items[0].Spec.NodeName != node {
			return fmt.Errorf("%d echo pods; want one, on %s", len(pods.Items), node)
		}
		name = pods.Items[0].Name
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return name
}

// healthIs asks the health-check node port at hc and checks its status and
// the local endpoint count it reports.
func healthIs(hc netip.AddrPort, status, endpoints int) error {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + hc.String() + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return err
	}
	var got struct {
		LocalEndpoints int `json:"localEndpoints"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return fmt.Errorf("status %d, body %q: %w", resp.StatusCode, body, err)
	}
	if resp.StatusCode != status || got.LocalEndpoints != endpoints {
		return fmt.Errorf("status %d with %d local endpoints; want %d with %d", resp.StatusCode, got.LocalEndpoints, status, endpoints)
	}
	return nil
}
