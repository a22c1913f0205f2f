//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
)

// vsConnections reads the cumulative connection counter of a virtual server;
// it starts again from zero if the virtual server is deleted and re-added.
// The kernel's estimator folds per-CPU counters in every 2 s, so a reading
// lags; callers wait for it to settle.
const counterSettle = 2500 * time.Millisecond

func vsConnections(t *testing.T, vip string) int {
	t.Helper()
	out, err := framework.Output("ipvsadm", "-Ln", "--stats", "-t", vip)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "TCP" {
			n, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("parse %q: %v", l, err)
			}
			return n
		}
	}
	t.Fatalf("no virtual server %s in:\n%s", vip, out)
	return 0
}

// TestRestartLosesNothing: restarting the proxier while a client loops on a
// Service loses no request and removes and re-adds no kernel object, nor
// the rule that keeps the node from a load balancer.
func TestRestartLosesNothing(t *testing.T) {
	old := ourProxier(t)
	const ns = "restart"
	mustNamespace(t, ns)
	a, b := mustPod(t, "restart-a", "10.244.23.1", true), mustPod(t, "restart-b", "10.244.23.2", true)
	client := mustPod(t, "restart-client", "10.244.23.100", false)
	svc, slice := webService(ns, "10.96.23.10", a, b)
	// A load balancer whose source ranges leave the node out.
	svc.Spec.Type, svc.Spec.LoadBalancerSourceRanges = v1.ServiceTypeLoadBalancer, []string{"192.168.23.0/24"}
	svc.Spec.AllocateLoadBalancerNodePorts = new(bool)
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.250.23.1"}}
	mustApply(t, svc, slice)
	vip := ap("10.96.23.10:80")
	waitAnswerSet(t, client.HTTP, vip, "restart-a,restart-b", 4, 30*time.Second)
	// The load balancer's address comes with the status update, which a
	// sync may see after the Service itself: wait for its rule.
	eventually(t, "the rule keeping the node from the load balancer", 30*time.Second, func() error {
		if _, found := outFilterPackets(t, "10.250.23.1"); !found {
			return fmt.Errorf("no KUBE-IPVS-OUT-FILTER rule for 10.250.23.1")
		}
		return nil
	})
	// The node is refused, and the refusal counted on the rule.
	if who, err := framework.NodeHTTP(ap("10.250.23.1:80"), time.Second); err == nil {
		t.Fatalf("the node, outside the source ranges, was answered by %s", who)
	}
	blockedBefore := blockedPackets(t, "10.250.23.1")
	if blockedBefore == 0 {
		t.Fatal("the blocked load balancer's rule counted no packet")
	}

	removedAddresses := watchRemovedAddresses(t, nil)

	time.Sleep(counterSettle)
	before := vsConnections(t, vip.String())
	stop := clientLoop(20*time.Millisecond, func() error {
		_, err := client.HTTP(vip, 2*time.Second)
		return err
	})

	time.Sleep(500 * time.Millisecond)
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // traffic keeps flowing with no proxier at all
	start := time.Now()
	p, err := framework.StartOurs(env, "kube-ipvs-proxy", proxierFlags...)
	if err != nil {
		t.Fatal(err)
	}
	replaceProxier(t, p)
	if err := framework.WaitSynced(p, start, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted proxier synced in %s", time.Since(start).Round(time.Millisecond))
	time.Sleep(time.Second)
	seen := stop()
	removed := removedAddresses()

	ok := seen.requests - seen.failed
	if seen.failed > 0 {
		t.Errorf("%d of %d requests failed across the restart; first: %v", seen.failed, seen.requests, seen.first)
	}
	if ok < 20 {
		t.Errorf("only %d requests answered; the client loop did not run", ok)
	}
	time.Sleep(counterSettle)
	if after := vsConnections(t, vip.String()); after < before+int(ok) {
		t.Errorf("virtual server counter went from %d to %d over %d requests: it was re-created", before, after, ok)
	}
	if len(removed) > 0 {
		t.Errorf("addresses removed from kube-ipvs0 during the restart: %v", removed)
	}
	ops, err := framework.Metric("kube_ipvs_proxy_kernel_operations_total")
	if err != nil {
		t.Fatal(err)
	}
	if ops[0] != 0 {
		t.Errorf("restarted proxier wrote %v kernel objects, want 0 (everything was in place)", ops)
	}
	if after := blockedPackets(t, "10.250.23.1"); after < blockedBefore {
		t.Errorf("the blocked load balancer's rule counted %d packets before the restart, %d after: it was rewritten", blockedBefore, after)
	}
}

// blockedPackets is the packet counter of the KUBE-IPVS-OUT-FILTER rule
// that keeps the node from vip; rewriting the rule starts it from zero.
func blockedPackets(t *testing.T, vip string) int {
	t.Helper()
	packets, found := outFilterPackets(t, vip)
	if !found {
		out, _ := framework.Output("iptables-save", "-c", "-t", "filter")
		t.Fatalf("no rule keeps the node from %s:\n%s", vip, out)
	}
	return packets
}

// outFilterPackets reads that rule's packet counter, and whether it is there.
func outFilterPackets(t *testing.T, vip string) (int, bool) {
	t.Helper()
	out, err := framework.Output("iptables-save", "-c", "-t", "filter")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "-A KUBE-IPVS-OUT-FILTER ") && strings.Contains(l, "--vaddr "+vip+" ") {
			var packets, bytes int
			if _, err := fmt.Sscanf(l, "[%d:%d]", &packets, &bytes); err != nil {
				t.Fatalf("counters of %q: %v", l, err)
			}
			return packets, true
		}
	}
	return 0, false
}

// TestLinkDeletedBehindOurBack: deleting kube-ipvs0 (and with it every VIP)
// is repaired by the next periodic sync. Serial: it briefly breaks every Service.
func TestLinkDeletedBehindOurBack(t *testing.T) {
	ourProxier(t)
	const ns = "link"
	mustNamespace(t, ns)
	a := mustPod(t, "link-a", "10.244.24.1", true)
	client := mustPod(t, "link-client", "10.244.24.100", false)
	svc, slice := webService(ns, "10.96.24.10", a)
	mustApply(t, svc, slice)
	vip := ap("10.96.24.10:80")
	waitAnswerSet(t, client.HTTP, vip, "link-a", 2, 30*time.Second)

	if out, err := exec.Command("ip", "link", "del", "kube-ipvs0").CombinedOutput(); err != nil {
		t.Fatalf("ip link del kube-ipvs0: %v: %s", err, out)
	}
	// The sync period is 5 s; allow two of them.
	waitAnswerSet(t, client.HTTP, vip, "link-a", 2, 12*time.Second)
	if !hasAddress(t, vip.Addr()) || !hasAddress(t, mustAddr("10.96.0.1")) {
		t.Fatal("VIPs not re-bound on the re-created kube-ipvs0")
	}
}

// TestFlushedTablesRepaired: another program flushes the nat and filter
// tables and deletes their chains (as a firewall reload does), and destroys
// one of our sets. The next drift checks write our chains and the set back,
// entries included: a NodePort client outside the node is masqueraded
// again. Serial: it briefly breaks every Service's iptables rules.
func TestFlushedTablesRepaired(t *testing.T) {
	ourProxier(t)
	const ns = "flush"
	mustNamespace(t, ns)
	a := mustPod(t, "flush-a", "10.244.36.1", true)
	client := mustPod(t, "flush-client", "192.168.36.2", false)
	svc, slice := nodePortService(ns, "10.96.36.10", v1.ServiceExternalTrafficPolicyCluster, 30184, 30155, a)
	mustApply(t, svc, slice)
	to := netip.AddrPortFrom(nodeAddress(t), 30184)
	waitAnswerSet(t, client.HTTP, to, "flush-a", 2, 30*time.Second)
	chains := ourIPTables(t)
	entry := ipset.Entry{IP: mustAddr("10.96.36.10"), Protocol: ipset.EntryTCP, Port: 80}

	for _, cmd := range [][]string{
		{"iptables", "-t", "nat", "-F"}, {"iptables", "-t", "nat", "-X"},
		{"iptables", "-t", "filter", "-F"}, {"iptables", "-t", "filter", "-X"},
		{"ipset", "destroy", "KUBE-CLUSTER-IP"},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	// The sync period is 5 s; allow two of them.
	eventually(t, "chains and set repaired", 12*time.Second, func() error {
		if got := ourIPTables(t); got != chains {
			return fmt.Errorf("our chains differ:\n%s", got)
		}
		if !hasEntry(t, "KUBE-CLUSTER-IP", entry) {
			return fmt.Errorf("KUBE-CLUSTER-IP lacks %v", entry)
		}
		return nil
	})
	answer, err := client.Source(to, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(answer, " "+client.IP.String()) {
		t.Errorf("NodePort traffic not masqueraded after the repair: %q", answer)
	}
}

// TestCleanup: --cleanup, run twice with no apiserver, leaves nothing of
// ours: no virtual server outside --ipvs-exclude-cidrs, no kube-ipvs0, no
// local route of --ipvs-vip-mode=local-route, no KUBE- set, none of our
// chains or the jumps to them; kubelet's chain and
// the excluded virtual server stay. Then --init-only makes the node-wide
// settings and nothing else. Serial: it stops the shared proxier.
func TestCleanup(t *testing.T) {
	ourProxier(t)
	const ns = "cleanup"
	mustNamespace(t, ns)
	a := mustPod(t, "cleanup-a", "10.244.40.1", true)
	client := mustPod(t, "cleanup-client", "10.244.40.100", false)
	svc, slice := webService(ns, "10.96.40.10", a)
	mustApply(t, svc, slice)
	waitAnswerSet(t, client.HTTP, ap("10.96.40.10:80"), "cleanup-a", 2, 30*time.Second)
	for _, cmd := range [][]string{
		{"ipvsadm", "-A", "-t", "10.250.99.2:22", "-s", "rr"},
		{"iptables", "-t", "nat", "-N", "KUBE-KUBELET-CANARY"},
		// As --ipvs-vip-mode=local-route leaves them (proto 176, through lo).
		{"ip", "route", "add", "local", "10.97.0.0/16", "dev", "lo", "table", "local", "proto", "176"},
		{"ip", "-6", "route", "add", "local", "fd00:10:97::/112", "dev", "lo", "table", "local", "proto", "176"},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	t.Cleanup(func() {
		_ = exec.Command("ipvsadm", "-D", "-t", "10.250.99.2:22").Run()
		_ = exec.Command("iptables", "-t", "nat", "-X", "KUBE-KUBELET-CANARY").Run()
		_ = exec.Command("ip", "route", "del", "local", "10.97.0.0/16", "dev", "lo", "table", "local", "proto", "176").Run()
		_ = exec.Command("ip", "-6", "route", "del", "local", "fd00:10:97::/112", "dev", "lo", "table", "local", "proto", "176").Run()
	})
	sharedMu.Lock()
	err := shared.Stop()
	shared = nil
	sharedMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}

	for i := 1; i <= 2; i++ {
		out, err := exec.Command(env.Bin+"/kube-ipvs-proxy", "--cleanup", "--ipvs-exclude-cidrs", excludedCIDR).CombinedOutput()
		if err != nil {
			t.Fatalf("--cleanup, run %d: %v:\n%s", i, err, out)
		}
	}
	ipvsState, _ := framework.Output("ipvsadm", "-Sn")
	if strings.TrimSpace(ipvsState) != "-A -t 10.250.99.2:22 -s rr" {
		t.Errorf("IPVS after --cleanup:\n%s\nwant only the excluded virtual server", ipvsState)
	}
	if sets, _ := framework.Output("ipset", "list", "-n"); strings.Contains(sets, "KUBE-") {
		t.Errorf("sets after --cleanup:\n%s", sets)
	}
	for _, family := range []string{"-4", "-6"} {
		if routes, _ := framework.Output("ip", family, "route", "show", "table", "local", "proto", "176"); strings.TrimSpace(routes) != "" {
			t.Errorf("local routes after --cleanup:\n%s", routes)
		}
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		saved, err := framework.Output(save)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(saved, "\n") {
			if strings.Contains(l, "KUBE-") && !strings.Contains(l, "KUBE-KUBELET-CANARY") {
				t.Errorf("%s after --cleanup still has %q", save, l)
			}
		}
		if save == "iptables-save" && !strings.Contains(saved, ":KUBE-KUBELET-CANARY") {
			t.Error("--cleanup removed kubelet's chain")
		}
	}
	if _, err := framework.Output("ip", "link", "show", "kube-ipvs0"); err == nil {
		t.Error("kube-ipvs0 is still there")
	}

	// --init-only makes the node-wide settings, creates no object, exits.
	out, err := exec.Command(env.Bin+"/kube-ipvs-proxy", "--init-only", "--conntrack-tcp-timeout-established", "2h").CombinedOutput()
	if err != nil {
		t.Fatalf("--init-only: %v:\n%s", err, out)
	}
	if v, _ := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_tcp_timeout_established"); strings.TrimSpace(string(v)) != "7200" {
		t.Errorf("--init-only left nf_conntrack_tcp_timeout_established at %q, want 7200", v)
	}
	if _, err := framework.Output("ip", "link", "show", "kube-ipvs0"); err == nil {
		t.Error("--init-only created kube-ipvs0")
	}
}
