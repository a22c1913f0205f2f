//go:build e2e

package multinode

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
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
// every node answers,
// forwarding to the pod's node as itself (masqueraded).
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

// TestLocalNodePortKeepsToItsNode reads every node's IPVS table for
// Service spread-local (externalTrafficPolicy Local, pods spread over the
// nodes): a node with ready pods of it gives its NodePort those pods alone
// as real servers; a node without falls back to all of them, as upstream's
// IPVS mode does so that pods there can still reach the Service (traffic
// from outside is not masqueraded there, so it fails: the policy).
// Requests cannot tell a node that sends its Local NodePort's traffic to
// other nodes' pods while it has its own: the table can.
func TestLocalNodePortKeepsToItsNode(t *testing.T) {
	ctx, cancel := framework.Ctx()
	defer cancel()
	svc, err := env.Admin.CoreV1().Services("multinode").Get(ctx, "spread-local", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := uint16(svc.Spec.Ports[0].NodePort)
	if err := env.WaitRollout("multinode", "deployment/spread", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, n := range bed.Nodes {
		vs := netip.AddrPortFrom(n.IP, port)
		var want []string
		if err := framework.Eventually(30*time.Second, time.Second, func() error {
			byNode, err := readyEndpointsByNode("spread-local")
			if err != nil {
				return err
			}
			want = byNode[n.Name]
			if len(want) == 0 {
				for _, eps := range byNode {
					want = append(want, eps...)
				}
			}
			return realServersAre(n, vs, want)
		}); err != nil {
			t.Errorf("Local NodePort %s on %s: %v", vs, n.Name, err)
			continue
		}
		t.Logf("Local NodePort %s on %s: real servers %v", vs, n.Name, want)
	}
}

// readyEndpointsByNode reads Service svc's EndpointSlices: its ready
// endpoints' address:port by node.
func readyEndpointsByNode(svc string) (map[string][]string, error) {
	ctx, cancel := framework.Ctx()
	defer cancel()
	slices, err := env.Admin.DiscoveryV1().EndpointSlices("multinode").List(ctx, metav1.ListOptions{LabelSelector: discovery.LabelServiceName + "=" + svc})
	if err != nil {
		return nil, err
	}
	byNode := map[string][]string{}
	for _, sl := range slices.Items {
		if len(sl.Ports) != 1 || sl.Ports[0].Port == nil {
			return nil, fmt.Errorf("slice %s: %d ports; want one", sl.Name, len(sl.Ports))
		}
		for _, ep := range sl.Endpoints {
			if ep.NodeName == nil || ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				byNode[*ep.NodeName] = append(byNode[*ep.NodeName], netip.AddrPortFrom(netip.MustParseAddr(a), uint16(*sl.Ports[0].Port)).String())
			}
		}
	}
	return byNode, nil
}

// realServersAre checks that node n's IPVS virtual server vs (TCP) has
// exactly the real servers want (address:port) of non-zero weight: one left
// draining (weight 0, its connections not yet ended) takes no new
// connection.
func realServersAre(n *framework.BedNode, vs netip.AddrPort, want []string) error {
	out, err := n.Command("ipvsadm", "-Ln", "-t", vs.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ipvsadm -Ln -t %s: %w: %s", vs, err, out)
	}
	var got []string
	for _, line := range strings.Split(string(out), "\n") {
		// "  -> 10.244.1.2:8080  Masq  1  0  0", after the column header.
		f := strings.Fields(line)
		if len(f) >= 4 && f[0] == "->" && f[1] != "RemoteAddress:Port" && f[3] != "0" {
			got = append(got, f[1])
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		return fmt.Errorf("virtual server %s has real servers %v of non-zero weight; want %v:\n%s", vs, got, want, out)
	}
	return nil
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
