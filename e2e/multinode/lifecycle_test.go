//go:build e2e

package multinode

import (
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// externalIP is Service spread's external IP, which the segment routes to
// the first node, as a router in front of a cluster would.
var externalIP = netip.MustParseAddr("203.0.113.10")

// spreadLoops start clients looping every 100 ms through the spread
// Services: one on each node to the ClusterIP; from outside, to each
// node's NodePorts (Cluster and Local: every node has a pod) and to the
// external IP.
func spreadLoops(t *testing.T) []*framework.Loop {
	t.Helper()
	ctx, cancel := framework.Ctx()
	defer cancel()
	port := map[string]uint16{}
	var clusterIP netip.Addr
	for _, name := range []string{"spread", "spread-cluster", "spread-local"} {
		svc, err := env.Admin.CoreV1().Services("multinode").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		port[name] = uint16(svc.Spec.Ports[0].NodePort)
		if name == "spread" {
			clusterIP = netip.MustParseAddr(svc.Spec.ClusterIP)
		}
	}
	if out, err := framework.Output("ip", "route", "replace", externalIP.String()+"/32", "via", bed.Nodes[0].IP.String()); err != nil {
		t.Fatal(out, err)
	}
	const timeout, every = 3 * time.Second, 100 * time.Millisecond
	type target struct {
		name string
		send func() (string, error)
	}
	var targets []target
	for _, n := range bed.Nodes {
		c, to := n.Client(), netip.AddrPortFrom(clusterIP, 80)
		targets = append(targets, target{n.Name + " to ClusterIP", func() (string, error) { return c.HTTP(to, timeout) }})
	}
	for _, n := range bed.Nodes {
		for _, svc := range []string{"spread-cluster", "spread-local"} {
			to := netip.AddrPortFrom(n.IP, port[svc])
			targets = append(targets, target{"outside to " + svc + " on " + n.Name, func() (string, error) { return framework.OutsideGet(to, "/", timeout) }})
		}
	}
	ext := netip.AddrPortFrom(externalIP, 80)
	targets = append(targets, target{"outside to external IP", func() (string, error) { return framework.OutsideGet(ext, "/", timeout) }})
	var loops []*framework.Loop
	for _, tg := range targets {
		if err := framework.Eventually(time.Minute, time.Second, func() error { _, err := tg.send(); return err }); err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
		l := framework.StartLoop(tg.name, every, tg.send)
		t.Cleanup(func() { l.End() })
		loops = append(loops, l)
	}
	return loops
}

// TestRollingUpdate rolls the proxier's DaemonSet to a new image tag,
// node by node, while clients on every node and outside loop through the
// ClusterIP, both NodePorts on every node and the external IP: ours must
// lose no request. Upstream's failures are logged (kube-proxy loses the
// odd request restarting over its own state; e2e/node says the same).
func TestRollingUpdate(t *testing.T) {
	next := deployed.Tag + "-next"
	ctr := filepath.Join(framework.NodeDir(), "root/usr/bin/ctr")
	for _, n := range bed.Nodes {
		if out, err := n.Command(ctr, "-n", "k8s.io", "images", "tag", "--force",
			deployed.Image+":"+deployed.Tag, deployed.Image+":"+next).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", n.Name, err, out)
		}
	}
	before := proxierPods(t)
	loops := spreadLoops(t)
	start := time.Now()
	if err := deployed.Deploy(env, next); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := deployed.Deploy(env, deployed.Tag); err != nil {
			t.Error(err)
		}
		_ = env.WaitRollout("kube-system", "daemonset/"+deployed.Name, 5*time.Minute)
	}()
	if err := env.WaitRollout("kube-system", "daemonset/"+deployed.Name, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	after := proxierPods(t)
	t.Logf("rolled %v to %v in %s", before, after, time.Since(start).Round(time.Second))
	for node, pod := range after {
		if pod == before[node] {
			t.Fatalf("%s: the proxier's pod %s was not replaced", node, pod)
		}
	}
	time.Sleep(3 * time.Second) // the last new proxier's first syncs
	if deployed.Name == "kube-ipvs-proxy" {
		framework.RequireNoFailures(t, loops...)
	} else {
		framework.LogFailures(t, "across kube-proxy's restarts", loops...)
	}
}

// TestDrain drains the last node, whose spread pod goes to another node,
// while the clients loop, and logs what failed per client: requests to
// the drained node's Local NodePort must fail once it has no pod (that is
// the policy), and the rest is what the proxier loses while endpoints
// move. With ours, at most drainFailMax of those other requests may fail
// (one of 1,913 did in the first runs, upstream lost 141 of 1,693: its
// real servers go before the pods end); the counts are compared with
// upstream's in docs/testing.md.
func TestDrain(t *testing.T) {
	last := bed.Nodes[len(bed.Nodes)-1].Name
	loops := spreadLoops(t)
	start := time.Now()
	if _, err := env.Kubectl("drain", last, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=3m"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := env.Kubectl("uncordon", last); err != nil {
			t.Error(err)
		}
	}()
	if err := env.WaitRollout("multinode", "deployment/spread", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	drained := time.Now()
	time.Sleep(10 * time.Second)
	byPolicy := "outside to spread-local on " + last
	sent, failed := 0, 0
	for _, l := range loops {
		n, fails := l.End()
		t.Logf("%s: %d requests, %d failed (%s)", l.Name, n, len(fails), framework.Spans(fails, start))
		if l.Name != byPolicy {
			sent, failed = sent+n, failed+len(fails)
		}
	}
	t.Logf("drained and rescheduled in %s; %d of the %d requests that must not fail failed", drained.Sub(start).Round(100*time.Millisecond), failed, sent)
	if deployed.Name == "kube-ipvs-proxy" && float64(failed) > drainFailMax*float64(sent) {
		t.Errorf("%d of %d requests failed while the node drained, more than %.0f%%", failed, sent, 100*drainFailMax)
	}
}

// drainFailMax is the share of requests that may fail while a node drains
// (those to its Local NodePort aside): a pod that ends mid-request, not a
// proxier that loses endpoints.
const drainFailMax = 0.01

// proxierPods is the live proxier pod on each node.
func proxierPods(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := framework.Ctx()
	defer cancel()
	pods, err := env.Admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + deployed.App})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = p.Name
		}
	}
	if len(out) != len(bed.Nodes) {
		t.Fatalf("proxier pods on %d nodes, want %d: %v", len(out), len(bed.Nodes), out)
	}
	return out
}
