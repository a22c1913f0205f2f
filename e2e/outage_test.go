//go:build e2e

package e2e

import (
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
)

// apiserverRule cuts the VM off from the apiserver (its only route to it is
// 10.0.2.100:6443): connections are refused, as when kube-apiserver is down.
var apiserverRule = []string{"OUTPUT", "-d", "10.0.2.100", "-p", "tcp", "--dport", "6443", "-j", "REJECT", "--reject-with", "tcp-reset"}

// TestAPIServerOutage: with the apiserver unreachable for 60 s, a client
// looping on a Service sees no failed request, the proxier writes nothing
// to the kernel (so removes nothing), and /healthz stays 200, as upstream's
// does with no change pending. A change made once it is back is
// programmed, and so is a new Service. Serial: every test needs the apiserver.
func TestAPIServerOutage(t *testing.T) {
	ourProxier(t)
	const ns = "outage"
	mustNamespace(t, ns)
	a, b := mustPod(t, "outage-a", "10.244.41.1", true), mustPod(t, "outage-b", "10.244.41.2", true)
	client := mustPod(t, "outage-client", "10.244.41.100", false)
	svc, slice := webService(ns, "10.96.41.10", a)
	mustApply(t, svc, slice)
	vip := ap("10.96.41.10:80")
	waitAnswerSet(t, client.HTTP, vip, "outage-a", 2, 30*time.Second)

	var requests, failed atomic.Int64
	stop := make(chan struct{})
	var loop sync.WaitGroup
	loop.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			requests.Add(1)
			if _, err := client.HTTP(vip, 2*time.Second); err != nil {
				failed.Add(1)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	const ops = "kubeproxy_sync_proxy_rules_kernel_operations_total"
	opsBefore := gauge(t, ops)

	if out, err := exec.Command("iptables", append([]string{"-I"}, apiserverRule...)...).CombinedOutput(); err != nil {
		t.Fatalf("cut the apiserver off: %v: %s", err, out)
	}
	restore := func() { _ = exec.Command("iptables", append([]string{"-D"}, apiserverRule...)...).Run() }
	t.Cleanup(restore)
	// Open connections (the proxier's watches) are cut too, as a restarting
	// apiserver cuts them.
	if out, err := exec.Command("ss", "-K", "dst", "10.0.2.100", "dport", "=", "6443").CombinedOutput(); err != nil {
		t.Fatalf("cut the open connections: %v: %s", err, out)
	}
	if _, err := env.Admin.Discovery().ServerVersion(); err == nil {
		t.Fatal("the apiserver still answers: the outage is not one")
	}
	time.Sleep(55 * time.Second)
	if status, body := get(t, "http://127.0.0.1:10256/healthz"); status != 200 {
		t.Errorf("/healthz during the outage: %d %s", status, body)
	}
	time.Sleep(5 * time.Second)
	if got := gauge(t, ops); got != opsBefore {
		t.Errorf("%v kernel writes during the outage, want none", got-opsBefore)
	}
	restore()

	// Back: a change is programmed once the watches are re-established.
	_, both := webService(ns, "10.96.41.10", a, b)
	mustApply(t, both)
	waitAnswerSet(t, client.HTTP, vip, "outage-a,outage-b", 8, 90*time.Second)
	// The Service watch comes back on its own backoff, apart from the
	// slices': a new Service is programmed too before the next test, which
	// creates one and gives it 30 s.
	after, afterSlice := webService(ns, "10.96.41.11", a)
	after.Name, afterSlice.Name = "after", "after-1"
	afterSlice.Labels[discovery.LabelServiceName] = "after"
	mustApply(t, after, afterSlice)
	waitAnswerSet(t, client.HTTP, ap("10.96.41.11:80"), "outage-a", 2, 90*time.Second)
	close(stop)
	loop.Wait()
	if n := failed.Load(); n != 0 {
		t.Errorf("%d of %d requests failed across the outage", n, requests.Load())
	}
	t.Logf("%d requests across the outage, none failed", requests.Load())
}
