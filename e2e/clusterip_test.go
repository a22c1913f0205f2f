//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestClusterIPTraffic: a client pod reaches a TCP+UDP ClusterIP Service and
// gets answers from all its pods; scaling the endpoints down and up changes
// who answers within a second; deleting the Service removes its virtual
// servers, its address on kube-ipvs0 and its ipset entries.
func TestClusterIPTraffic(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "traffic"
	mustNamespace(t, ns)
	a, b, c, d := mustPod(t, "traffic-a", "10.244.20.1", true), mustPod(t, "traffic-b", "10.244.20.2", true),
		mustPod(t, "traffic-c", "10.244.20.3", true), mustPod(t, "traffic-d", "10.244.20.4", true)
	client := mustPod(t, "traffic-client", "10.244.20.100", false)

	tcp, udp := v1.ProtocolTCP, v1.ProtocolUDP
	ports := []discovery.EndpointPort{framework.SlicePort("http", tcp, 8080), framework.SlicePort("dns", udp, 5353)}
	slice := func(pods ...*framework.Pod) *discovery.EndpointSlice {
		var eps []discovery.Endpoint
		for _, p := range pods {
			eps = append(eps, framework.Endpoint(p.IP.String(), "other-node", true))
		}
		return framework.Slice(ns, "web", "web-1", ports, eps...)
	}
	mustApply(t, framework.ClusterIPService(ns, "web", "10.96.20.10",
		framework.Port("http", tcp, 80, 8080), framework.Port("dns", udp, 53, 5353)), slice(a, b, c))

	vipTCP, vipUDP := ap("10.96.20.10:80"), ap("10.96.20.10:53")
	waitAnswerSet(t, client.HTTP, vipTCP, "traffic-a,traffic-b,traffic-c", 9, 30*time.Second)
	waitAnswerSet(t, client.UDP, vipUDP, "traffic-a,traffic-b,traffic-c", 9, 10*time.Second)

	mustApply(t, slice(a, b))
	if took := waitAnswerSet(t, client.HTTP, vipTCP, "traffic-a,traffic-b", 6, 5*time.Second); took > time.Second {
		t.Errorf("TCP: scale-down took %s to show, want under 1s", took)
	}
	if took := waitAnswerSet(t, client.UDP, vipUDP, "traffic-a,traffic-b", 6, 5*time.Second); took > time.Second {
		t.Errorf("UDP: scale-down took %s to show, want under 1s", took)
	}
	mustApply(t, slice(a, b, d))
	if took := waitAnswerSet(t, client.HTTP, vipTCP, "traffic-a,traffic-b,traffic-d", 9, 5*time.Second); took > time.Second {
		t.Errorf("TCP: scale-up took %s to show, want under 1s", took)
	}
	if took := waitAnswerSet(t, client.UDP, vipUDP, "traffic-a,traffic-b,traffic-d", 9, 5*time.Second); took > time.Second {
		t.Errorf("UDP: scale-up took %s to show, want under 1s", took)
	}

	if err := env.DeleteService(ns, "web"); err != nil {
		t.Fatal(err)
	}
	vip := mustAddr("10.96.20.10")
	keyTCP := ipvs.Key{Address: vip, Protocol: ipvs.TCP, Port: 80}
	keyUDP := ipvs.Key{Address: vip, Protocol: ipvs.UDP, Port: 53}
	// UDP goes at once; TCP drains (TestLongLivedConnectionDrains): kept,
	// its VIP bound, until the connections made here have left TIME_WAIT.
	eventually(t, "service deleted from the kernel", 5*time.Second, func() error {
		rs, err := realServers(t, keyTCP)
		switch {
		case hasVirtualServer(t, keyUDP):
			return fmt.Errorf("UDP virtual server still present")
		case err != nil || strings.Contains(strings.Join(rs, " "), "/1"):
			return fmt.Errorf("TCP real servers %v (%v): not all at weight 0", rs, err)
		case hasEntry(t, "KUBE-CLUSTER-IP", ipset.Entry{IP: vip, Protocol: ipset.EntryTCP, Port: 80}),
			hasEntry(t, "KUBE-CLUSTER-IP", ipset.Entry{IP: vip, Protocol: ipset.EntryUDP, Port: 53}):
			return fmt.Errorf("ipset entries still present")
		}
		return nil
	})
	if _, err := client.HTTP(vipTCP, 500*time.Millisecond); err == nil {
		t.Errorf("deleted service still answers")
	}
}

// TestSessionAffinity: with ClientIP affinity one client always reaches the same pod.
func TestSessionAffinity(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "affinity"
	mustNamespace(t, ns)
	a, b, c := mustPod(t, "sticky-a", "10.244.21.1", true), mustPod(t, "sticky-b", "10.244.21.2", true),
		mustPod(t, "sticky-c", "10.244.21.3", true)
	client := mustPod(t, "sticky-client", "10.244.21.100", false)
	svc := framework.ClusterIPService(ns, "sticky", "10.96.21.10", framework.Port("", v1.ProtocolTCP, 80, 8080))
	svc.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	var eps []discovery.Endpoint
	for _, p := range []*framework.Pod{a, b, c} {
		eps = append(eps, framework.Endpoint(p.IP.String(), "", true))
	}
	mustApply(t, svc, framework.Slice(ns, "sticky", "sticky-1",
		[]discovery.EndpointPort{framework.SlicePort("", v1.ProtocolTCP, 8080)}, eps...))

	vip := ap("10.96.21.10:80")
	eventually(t, "service programmed", 30*time.Second, func() error {
		rs, err := realServers(t, ipvs.Key{Address: vip.Addr(), Protocol: ipvs.TCP, Port: 80})
		if err != nil || len(rs) != 3 {
			return fmt.Errorf("real servers %v, %v", rs, err)
		}
		return nil
	})
	who, err := answers(client.HTTP, vip, 12)
	if err != nil {
		t.Fatal(err)
	}
	if set(who) != who[0] {
		t.Fatalf("ClientIP affinity: one client was answered by %s, want one pod", set(who))
	}
}

// TestDriftRepair: a virtual server, a VIP, an ipset entry and an iptables
// rule removed behind the proxier's back, and a rule added to one of its
// chains, are put right by the next periodic sync; until then the drift
// checks leave iptables alone.
func TestDriftRepair(t *testing.T) {
	t.Parallel()
	p := ourProxier(t)
	const ns = "drift"
	mustNamespace(t, ns)
	a := mustPod(t, "drift-a", "10.244.22.1", true)
	client := mustPod(t, "drift-client", "10.244.22.100", false)
	svc, slice := webService(ns, "10.96.22.10", a)
	mustApply(t, svc, slice)
	vip := ap("10.96.22.10:80")
	waitAnswerSet(t, client.HTTP, vip, "drift-a", 2, 30*time.Second)

	// After three drift checks (one every 5 s, slower while the suite runs
	// in parallel; the first writes the glue again to read it back), a
	// proxier that misread its own iptables chains would have rewritten
	// them. Serial tests before this one may have made it rewrite them.
	const rewrote = "iptables chains changed outside the proxier; rewrote them"
	rewrites, checks := countLogLines(t, p, rewrote), countLogLines(t, p, `full=true`)
	eventually(t, "three drift checks", time.Minute, func() error {
		if n := countLogLines(t, p, `full=true`) - checks; n < 3 {
			return fmt.Errorf("%d so far", n)
		}
		return nil
	})
	if n := countLogLines(t, p, rewrote) - rewrites; n != 0 {
		t.Fatalf("%d drift checks rewrote iptables nobody had touched (see %s)", n, p.LogPath)
	}
	glueBefore := ourIPTables(t)

	entry := ipset.Entry{IP: vip.Addr(), Protocol: ipset.EntryTCP, Port: 80}
	// Both chains' edits in one iptables-restore, so that no drift check
	// sees (and repairs) one alone; changes no ClusterIP traffic depends
	// on: parallel tests go on.
	restore := exec.Command("iptables-restore", "--noflush")
	restore.Stdin = strings.NewReader("*filter\n-D KUBE-SOURCE-RANGES-FIREWALL -j DROP\nCOMMIT\n*nat\n-A KUBE-NODE-PORT -j RETURN\nCOMMIT\n")
	if out, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("iptables-restore: %v: %s", err, out)
	}
	// A drift check between these deletions may put one back: delete
	// again until none is there.
	removed := false
	for range 5 {
		for _, cmd := range [][]string{
			{"ipvsadm", "-D", "-t", vip.String()},
			{"ip", "addr", "del", vip.Addr().String() + "/32", "dev", "kube-ipvs0"},
			{"ipset", "del", "-exist", "KUBE-CLUSTER-IP", "10.96.22.10,tcp:80"},
		} {
			_ = exec.Command(cmd[0], cmd[1:]...).Run() // gone already, if a try before removed it
		}
		if !hasVirtualServer(t, ipvs.Key{Address: vip.Addr(), Protocol: ipvs.TCP, Port: 80}) && !hasAddress(t, vip.Addr()) &&
			!hasEntry(t, "KUBE-CLUSTER-IP", entry) {
			removed = true
			break
		}
	}
	if !removed {
		t.Fatal("could not remove the kernel objects behind the proxier's back")
	}
	// The sync period is 5 s; allow two of them.
	eventually(t, "drift repaired", 12*time.Second, func() error {
		if !hasVirtualServer(t, ipvs.Key{Address: vip.Addr(), Protocol: ipvs.TCP, Port: 80}) || !hasAddress(t, vip.Addr()) ||
			!hasEntry(t, "KUBE-CLUSTER-IP", entry) {
			return fmt.Errorf("not restored yet")
		}
		if got := ourIPTables(t); got != glueBefore {
			return fmt.Errorf("iptables chains not restored yet:\n%s\nwant\n%s", got, glueBefore)
		}
		return nil
	})
	if n := countLogLines(t, p, rewrote) - rewrites; n != 1 {
		t.Errorf("%d iptables rewrites logged, want 1 (see %s)", n, p.LogPath)
	}
	waitAnswerSet(t, client.HTTP, vip, "drift-a", 2, 5*time.Second)
}

// ourIPTables is iptables-save's lines about our chains (KUBE-*), counters
// left out.
func ourIPTables(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	var b strings.Builder
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "*") || strings.Contains(l, "KUBE-") && !strings.HasPrefix(l, "#") {
			if strings.HasPrefix(l, ":") {
				l, _, _ = strings.Cut(l, " ")
			}
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// countLogLines counts the lines of a proxier's log that contain s.
func countLogLines(t *testing.T, p *framework.Process, s string) int {
	t.Helper()
	log, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(log), s)
}
