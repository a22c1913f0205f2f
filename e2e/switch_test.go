//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// switchFlags are given to both proxiers of a switch, so that neither has
// a setting to change: a drift check every 5 s runs within each test.
var switchFlags = append([]string{"--ipvs-sync-period", "5s"}, ruleFlags...)

// upstreamSwitchFlags add -v=2 for kube-proxy, which then logs why it
// ignores a Service's topology hints: after one rollback it did so for all
// of them, its log in the artifacts the only witness.
var upstreamSwitchFlags = slices.Concat(switchFlags, []string{"-v=2"})

// target is one Service kind as a client sees it: ask once, and the
// pods allowed to answer.
type target struct {
	name string
	ask  func() (string, error)
	want string // sorted, comma-separated pod names
}

// switchTargets applies a Service of each kind a switch must carry (fixture
// i of several, on addresses and node ports of its own) with its pods, and
// returns the clients' view of each: ClusterIP over TCP with ClientIP
// affinity, UDP and SCTP, its IPv6 cluster IP, an external IP, a NodePort
// from outside the node, a LoadBalancer with source ranges and
// externalTrafficPolicy Local, internalTrafficPolicy Local, and topology
// hints.
func switchTargets(t *testing.T, i int) []target {
	t.Helper()
	setZone(t, "zone-a")
	ns := fmt.Sprintf("switch-%d", i)
	mustNamespace(t, ns)
	n := 70 + 2*i
	ip := func(format string, last int) string { return fmt.Sprintf(format, n, last) }
	a := dualStackPod(t, ns+"-a", ip("10.244.%d.%d", 1), fmt.Sprintf("fd00:10:244:%d::1", n), true)
	b := dualStackPod(t, ns+"-b", ip("10.244.%d.%d", 2), fmt.Sprintf("fd00:10:244:%d::2", n), true)
	client := dualStackPod(t, ns+"-client", ip("10.244.%d.%d", 100), fmt.Sprintf("fd00:10:244:%d::100", n), false)
	outside := mustPod(t, ns+"-outside", ip("192.168.%d.%d", 2), false)
	tcp, udp, sctp := v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP
	nodePort := int32(30190 + 3*i)
	local, remote := a.Name, b.Name
	here := func(p *framework.Pod) string {
		if p == a {
			return framework.NodeName
		}
		return "other-node"
	}

	// web: dual-stack NodePort with an external IP and ClientIP affinity.
	web := framework.ClusterIPService(ns, "web", ip("10.96.%d.%d", 10),
		framework.Port("http", tcp, 80, 8080), framework.Port("dns", udp, 53, 5353), framework.Port("sctp", sctp, 9, 9009))
	web.Spec.Type, web.Spec.Ports[0].NodePort = v1.ServiceTypeNodePort, nodePort
	web.Spec.ClusterIPs = []string{ip("10.96.%d.%d", 10), fmt.Sprintf("fd00:10:96::%d10", n)}
	web.Spec.IPFamilyPolicy = ptr.To(v1.IPFamilyPolicyRequireDualStack)
	web.Spec.ExternalIPs = []string{ip("10.250.%d.%d", 2)}
	web.Spec.SessionAffinity = v1.ServiceAffinityClientIP
	webPorts := []discovery.EndpointPort{framework.SlicePort("http", tcp, 8080), framework.SlicePort("dns", udp, 5353), framework.SlicePort("sctp", sctp, 9009)}
	web4, web6 := slices6(ns, "web", webPorts, a, b)

	// lb: source ranges holding the outside client, externalTrafficPolicy Local.
	lb := framework.ClusterIPService(ns, "lb", ip("10.96.%d.%d", 11), framework.Port("", tcp, 80, 8080))
	lb.Spec.Type, lb.Spec.ExternalTrafficPolicy = v1.ServiceTypeLoadBalancer, v1.ServiceExternalTrafficPolicyLocal
	lb.Spec.Ports[0].NodePort, lb.Spec.HealthCheckNodePort = nodePort+1, nodePort+2
	lb.Spec.LoadBalancerSourceRanges = []string{ip("192.168.%d.%d", 0) + "/24"}
	lb.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip("10.250.%d.%d", 1)}}

	// itp: internalTrafficPolicy Local; topo: zone hints (the node is in zone-a).
	itp := framework.ClusterIPService(ns, "itp", ip("10.96.%d.%d", 12), framework.Port("", tcp, 80, 8080))
	itp.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	topo := framework.ClusterIPService(ns, "topo", ip("10.96.%d.%d", 13), framework.Port("", tcp, 80, 8080))
	slice := func(svc string, zone map[*framework.Pod]string) *discovery.EndpointSlice {
		var eps []discovery.Endpoint
		for _, p := range []*framework.Pod{a, b} {
			e := framework.Endpoint(p.IP.String(), here(p), true)
			if z := zone[p]; z != "" {
				e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: z}}}
			}
			eps = append(eps, e)
		}
		return framework.Slice(ns, svc, svc+"-1", []discovery.EndpointPort{framework.SlicePort("", tcp, 8080)}, eps...)
	}
	mustApply(t, web, web4, web6, lb, slice("lb", nil), itp, slice("itp", nil),
		topo, slice("topo", map[*framework.Pod]string{a: "zone-b", b: "zone-a"}))

	at := func(s string, port uint16) netip.AddrPort { return netip.AddrPortFrom(mustAddr(s), port) }
	vip, vip6 := ip("10.96.%d.%d", 10), fmt.Sprintf("fd00:10:96::%d10", n)
	// A request fails when it has no answer within 5 s: a SYN sent again
	// after a second is a slow answer, not a failure.
	asking := func(q ask, to netip.AddrPort) func() (string, error) {
		return func() (string, error) { return q(to, 5*time.Second) }
	}
	both := local + "," + remote
	return []target{
		{"ClusterIP TCP", asking(client.HTTP, at(vip, 80)), both},
		{"ClusterIP UDP", asking(client.UDP, at(vip, 53)), both},
		{"ClusterIP SCTP", asking(client.SCTP, at(vip, 9)), both},
		{"ClusterIP IPv6", asking(client.HTTP, at(vip6, 80)), both},
		{"external IP", asking(outside.HTTP, at(ip("10.250.%d.%d", 2), 80)), both},
		{"NodePort", asking(outside.HTTP, netip.AddrPortFrom(nodeAddress(t), uint16(nodePort))), both},
		{"LoadBalancer, eTP Local", asking(outside.HTTP, at(ip("10.250.%d.%d", 1), 80)), local},
		{"iTP Local", asking(client.HTTP, at(ip("10.96.%d.%d", 12), 80)), local},
		{"topology hints", asking(client.HTTP, at(ip("10.96.%d.%d", 13), 80)), remote},
	}
}

// waitServed waits until every target answers from its own pods.
func waitServed(t *testing.T, targets []target) {
	t.Helper()
	for _, tg := range targets {
		eventually(t, tg.name+" served", 60*time.Second, func() error { return tg.check() })
	}
}

// check asks once; an answer from a pod not allowed to give it is a failure.
func (tg target) check() error {
	who, err := tg.ask()
	if err != nil {
		return err
	}
	if !strings.Contains(","+tg.want+",", ","+who+",") {
		return fmt.Errorf("answered by %s, want one of {%s}", who, tg.want)
	}
	return nil
}

// loopsSummary is what the client loops of one switch saw, together.
type loopsSummary struct {
	requests, failed, slow  int64
	firstFailed, lastFailed time.Time
}

// startLoops starts a client loop on every target; the returned stop ends
// them, logs what each saw and sums it up.
func startLoops(t *testing.T, targets []target) (stop func() loopsSummary) {
	stops := make([]func() loopResult, len(targets))
	for i, tg := range targets {
		stops[i] = clientLoop(20*time.Millisecond, tg.check)
	}
	return func() loopsSummary {
		t.Helper()
		var sum loopsSummary
		for i, tg := range targets {
			res := stops[i]()
			sum.requests, sum.failed, sum.slow = sum.requests+res.requests, sum.failed+res.failed, sum.slow+res.slow
			line := fmt.Sprintf("%-24s %4d requests, %d failed, %d slow", tg.name, res.requests, res.failed, res.slow)
			if res.failed > 0 {
				first, last := res.failedAt[0], res.failedAt[len(res.failedAt)-1]
				line += fmt.Sprintf(" (failures sent %s to %s; first: %v)", first.Format("15:04:05.000"), last.Format("15:04:05.000"), res.first)
				if sum.firstFailed.IsZero() || first.Before(sum.firstFailed) {
					sum.firstFailed = first
				}
				if last.After(sum.lastFailed) {
					sum.lastFailed = last
				}
			}
			t.Log(line)
			if res.requests-res.failed < 5 {
				t.Errorf("%s: only %d requests answered; the loop hardly ran", tg.name, res.requests-res.failed)
			}
		}
		return sum
	}
}

// requireNoFailure fails the test if a request of a switch to us failed.
func requireNoFailure(t *testing.T, what string, sum loopsSummary) {
	t.Helper()
	logLoops(t, what, sum)
	if sum.failed > 0 {
		t.Errorf("%s: %d of %d requests failed", what, sum.failed, sum.requests)
	}
}

// logLoops says what the loops of a switch saw. A switch back to kube-proxy
// is measured, not required: its nftables mode answers nothing until its
// first sync, and its IPVS mode once ignored topology hints for a while
// (docs/migration.md).
func logLoops(t *testing.T, what string, sum loopsSummary) {
	t.Helper()
	t.Logf("%s: %d requests, %d failed, %d answered after over a second", what, sum.requests, sum.failed, sum.slow)
	if sum.failed > 0 {
		t.Logf("%s: failures from %s to %s (%s)", what, sum.firstFailed.Format("15:04:05.000"), sum.lastFailed.Format("15:04:05.000"),
			sum.lastFailed.Sub(sum.firstFailed).Round(100*time.Millisecond))
	}
}

// stopShared stops the proxier the suite shares; the next test that needs
// it starts it again.
func stopShared(t *testing.T) {
	t.Helper()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			t.Fatal(err)
		}
		replaceProxier(t, nil)
	}
}

// startSynced starts a proxier and waits for its first sync.
func startSynced(t *testing.T, start func() (*framework.Process, error)) *framework.Process {
	t.Helper()
	since := time.Now()
	p, err := start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() })
	if err := framework.WaitSynced(p, since, 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s started, synced in %s", since.Format("15:04:05.000"), p.Name, time.Since(since).Round(time.Millisecond))
	return p
}

// stopLogged stops p, logging when, to read beside the failed requests' times.
func stopLogged(t *testing.T, p *framework.Process) {
	t.Helper()
	t.Logf("%s: %s stopping", time.Now().Format("15:04:05.000"), p.Name)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
}

// startUpstreamWithZone starts kube-proxy in IPVS mode and returns it and
// its settled kernel state. kube-proxy ignores topology hints until its
// proxier has seen the node's zone label, and now and then starts without
// it though the label was set before it started ("node is missing label"
// at -v=2, every sync): a switch from that state would rightly change the
// hinted Services' real servers. It is then started again, up to twice.
func startUpstreamWithZone(t *testing.T, name string) (*framework.Process, framework.State) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		up := startSynced(t, func() (*framework.Process, error) {
			return framework.StartUpstream(env, fmt.Sprintf("%s-%d", name, attempt), upstreamSwitchFlags...)
		})
		state, err := settledState(t, up)
		if err != nil {
			t.Fatal(err)
		}
		log, err := os.ReadFile(up.LogPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "since node is missing label") || attempt == 3 {
			return up, state
		}
		t.Logf("%s ignores topology hints for want of the node's zone label, which is set: starting it again", up.Name)
		stopLogged(t, up)
	}
}

// TestSwitchFromUpstreamIPVSAndBack: kube-proxy in IPVS mode serves a
// Service of each kind; it stops and kube-ipvs-proxy starts on the same
// node while a client loops through each. No request fails, ours writes
// nothing (not at start, nor at its drift check) and the kernel state is
// the same, line for line. Then the rollback, measured: ours stops and
// kube-proxy starts again; every Service answers once it has synced.
func TestSwitchFromUpstreamIPVSAndBack(t *testing.T) {
	stopShared(t)
	if err := framework.CleanKernel(); err != nil {
		t.Fatal(err)
	}
	targets := switchTargets(t, 0)
	up, upState := startUpstreamWithZone(t, "kube-proxy-switch")
	waitServed(t, targets)

	loops := startLoops(t, targets)
	time.Sleep(time.Second)
	stopLogged(t, up)
	ours := startSynced(t, func() (*framework.Process, error) {
		return framework.StartOurs(env, "kube-ipvs-proxy-switch", switchFlags...)
	})
	time.Sleep(6 * time.Second) // past one drift check
	requireNoFailure(t, "switch in from IPVS mode", loops())
	ops, err := framework.Metric("kube_ipvs_proxy_kernel_operations_total")
	if err != nil {
		t.Fatal(err)
	}
	if ops[0] != 0 {
		t.Errorf("kube-ipvs-proxy wrote %v kernel objects taking over from kube-proxy, want 0", ops)
	}
	ourState, err := framework.ReadState()
	if err != nil {
		t.Fatal(err)
	}
	if ourState != upState {
		t.Errorf("the kernel state changed when kube-ipvs-proxy took over:\n%s", stateDiff(upState, ourState))
	}

	loops = startLoops(t, targets)
	time.Sleep(time.Second)
	stopLogged(t, ours)
	back := startSynced(t, func() (*framework.Process, error) {
		return framework.StartUpstream(env, "kube-proxy-rollback", upstreamSwitchFlags...)
	})
	backState, err := settledState(t, back)
	if err != nil {
		t.Fatal(err)
	}
	logLoops(t, "rollback to IPVS mode", loops())
	waitServed(t, targets)
	if backState != ourState {
		t.Logf("kube-proxy rewrote on rollback (- ours, + kube-proxy's):\n%s", stateDiff(ourState, backState))
	}
	if err := back.Stop(); err != nil {
		t.Fatal(err)
	}
}

// stateDiff lists the lines of each part of the kernel state only a has
// (-) and only b has (+).
func stateDiff(a, b framework.State) string {
	var out strings.Builder
	for _, p := range []struct{ name, a, b string }{
		{"ipvsadm -Sn", a.IPVS, b.IPVS}, {"ipset save", a.IPSets, b.IPSets}, {"kube-ipvs0", a.Addresses, b.Addresses},
		{"iptables-save", a.IPTables, b.IPTables}, {"ip6tables-save", a.IP6Tables, b.IP6Tables},
	} {
		if p.a != p.b {
			fmt.Fprintf(&out, "%s:\n%s", p.name, lineDiff(p.a, p.b))
		}
	}
	return out.String()
}

// TestSwitchFromIPTablesModeAndBack: from kube-proxy in iptables mode, ours
// starts and programs IPVS while iptables mode's rules still answer, then
// removes them (its KUBE-SVC-… chains, its filter chains and their
// jumps): no request fails. Back, measured: kube-proxy in iptables mode
// starts, and once it has synced, `kube-ipvs-proxy --cleanup` removes IPVS
// mode's objects and leaves the chains both modes use.
func TestSwitchFromIPTablesModeAndBack(t *testing.T) {
	switchFromMode(t, "iptables", 1, func() string {
		saved, err := framework.Output("iptables-save")
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, l := range strings.Split(saved, "\n") {
			for _, c := range []string{":KUBE-SVC-", ":KUBE-SEP-", ":KUBE-PROXY-CANARY", ":KUBE-NODEPORTS", ":KUBE-EXTERNAL-SERVICES"} {
				if strings.HasPrefix(l, c) {
					left = append(left, strings.Fields(l)[0])
				}
			}
		}
		return strings.Join(left, " ")
	}, func(targets []target, loops func() loopsSummary) {
		// kube-proxy syncs each family on its own; --cleanup comes once
		// both have synced, IPv6 too.
		eventually(t, "kube-proxy's IPv6 chains", time.Minute, func() error {
			if saved, err := framework.Output("ip6tables-save", "-t", "nat"); err != nil || !strings.Contains(saved, ":KUBE-SVC-") {
				return fmt.Errorf("no KUBE-SVC- chain in ip6tables yet (%v)", err)
			}
			return nil
		})
		out, err := exec.Command(filepath.Join(env.Bin, "kube-ipvs-proxy"), "--cleanup").CombinedOutput()
		if err != nil {
			t.Fatalf("kube-ipvs-proxy --cleanup: %v\n%s", err, out)
		}
		t.Logf("%s: kube-ipvs-proxy --cleanup done", time.Now().Format("15:04:05.000"))
		time.Sleep(2 * time.Second)
		logLoops(t, "rollback to iptables mode", loops())
		waitServed(t, targets)
	})
}

// TestSwitchFromNFTablesModeAndBack: the same from kube-proxy in nftables
// mode, whose table ours deletes once IPVS is programmed. Back: kube-proxy
// in nftables mode removes IPVS mode's objects itself, at its start.
func TestSwitchFromNFTablesModeAndBack(t *testing.T) {
	// kube-proxy refuses nftables mode before Linux 5.13 ("requires kernel
	// 5.13 or later"): on 5.10 there is nothing to switch from.
	if release, err := framework.Output("uname", "-r"); err != nil {
		t.Fatal(err)
	} else if !kernelAtLeast(release, 5, 13) {
		t.Skipf("kube-proxy's nftables mode needs Linux 5.13 or later; this is %s", strings.TrimSpace(release))
	}
	switchFromMode(t, "nftables", 2, func() string {
		tables, err := framework.Output("nft", "list", "tables")
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, l := range strings.Split(tables, "\n") {
			if strings.HasSuffix(l, " kube-proxy") {
				left = append(left, l)
			}
		}
		return strings.Join(left, ", ")
	}, func(targets []target, loops func() loopsSummary) {
		// kube-proxy's nftables mode removes IPVS mode's objects as it
		// starts, before its first sync: upstream's own gap, which the
		// rollback can only measure.
		time.Sleep(2 * time.Second)
		logLoops(t, "rollback to nftables mode", loops())
		waitServed(t, targets)
	})
}

// switchFromMode runs a switch from kube-proxy in mode to ours and back,
// on fixture's Services; leftovers lists what is left of the other mode,
// and rollback finishes the way back once kube-proxy has synced, ending
// the client loops.
func switchFromMode(t *testing.T, mode string, fixture int, leftovers func() string, rollback func([]target, func() loopsSummary)) {
	stopShared(t)
	if err := framework.CleanKernel(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = framework.CleanKernel() })
	targets := switchTargets(t, fixture)
	start := func(name string) func() (*framework.Process, error) {
		return func() (*framework.Process, error) {
			return framework.StartUpstreamMode(env, name, mode, upstreamSwitchFlags...)
		}
	}
	up := startSynced(t, start("kube-proxy-"+mode))
	waitServed(t, targets)
	if leftovers() == "" {
		t.Fatalf("kube-proxy in %s mode left nothing to find", mode)
	}

	loops := startLoops(t, targets)
	time.Sleep(time.Second)
	stopLogged(t, up)
	ours := startSynced(t, func() (*framework.Process, error) {
		return framework.StartOurs(env, "kube-ipvs-proxy-from-"+mode, switchFlags...)
	})
	eventually(t, mode+" mode's leftovers removed", 30*time.Second, func() error {
		if left := leftovers(); left != "" {
			return fmt.Errorf("left: %s", left)
		}
		return nil
	})
	t.Logf("%s: %s mode's leftovers are gone", time.Now().Format("15:04:05.000"), mode)
	time.Sleep(2 * time.Second)
	requireNoFailure(t, "switch in from "+mode+" mode", loops())
	if !hasVirtualServer(t, ipvs.Key{Address: mustAddr(fmt.Sprintf("10.96.%d.10", 70+2*fixture)), Protocol: ipvs.TCP, Port: 80}) {
		t.Error("no virtual server for the ClusterIP: the traffic did not go through IPVS")
	}

	loops = startLoops(t, targets)
	time.Sleep(time.Second)
	stopLogged(t, ours)
	back := startSynced(t, start("kube-proxy-back-to-"+mode))
	rollback(targets, loops)
	if out, err := framework.Output("ipvsadm", "-Sn"); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("IPVS mode's virtual servers left after the rollback (%v):\n%s", err, out)
	}
	if exec.Command("ip", "link", "show", "kube-ipvs0").Run() == nil {
		t.Error("kube-ipvs0 left after the rollback")
	}
	stopLogged(t, back)
}

// kernelAtLeast says whether a kernel release ("5.10.0-35-amd64") is at
// least major.minor.
func kernelAtLeast(release string, major, minor int) bool {
	var haveMajor, haveMinor int
	if _, err := fmt.Sscanf(strings.TrimSpace(release), "%d.%d", &haveMajor, &haveMinor); err != nil {
		return true // unknown: let the test find out
	}
	return haveMajor > major || haveMajor == major && haveMinor >= minor
}
