//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// Faults of iptables itself. The VM's iptables is iptables-nft, which takes
// no xtables lock, so these tests run a proxier of their own on
// iptables-legacy, which does: its PATH finds iptables-legacy-restore and
// -save as iptables-restore and -save. Serial: they replace the shared
// proxier, and the nft chains with legacy ones until they end.

// legacyProxier stops the shared proxier, cleans the kernel and starts one
// on iptables-legacy. Its iptables-restore hangs (sleeps, in a child of its
// own) while the file hang names exists. When the test ends it is stopped
// and the legacy chains removed; the next test starts a shared proxier
// again, which writes the nft chains.
func legacyProxier(t *testing.T, name, hang string) *framework.Process {
	t.Helper()
	sharedMu.Lock()
	old := shared
	sharedMu.Unlock()
	if old != nil {
		if err := old.Stop(); err != nil {
			t.Fatal(err)
		}
		replaceProxier(t, nil)
	}
	if err := framework.CleanKernel(); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, tool := range []string{"iptables", "ip6tables"} {
		restore := fmt.Sprintf("#!/bin/sh\n[ -e %q ] && sleep 3600\nexec /usr/sbin/%s-legacy-restore \"$@\"\n", hang, tool)
		if err := os.WriteFile(filepath.Join(bin, tool+"-restore"), []byte(restore), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/usr/sbin/"+tool+"-legacy-save", filepath.Join(bin, tool+"-save")); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, tool := range []string{"iptables", "ip6tables"} {
			saved, err := framework.Output(tool + "-legacy-save")
			if err != nil {
				t.Errorf("%s-legacy-save: %v", tool, err)
				continue
			}
			var keep []string
			for _, l := range strings.Split(saved, "\n") {
				if !strings.Contains(l, "KUBE-") {
					keep = append(keep, l)
				}
			}
			if _, err := runWithInput(strings.Join(keep, "\n")+"\n", tool+"-legacy-restore"); err != nil {
				t.Errorf("remove the legacy chains: %v", err)
			}
		}
	})
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	start := time.Now()
	p, err := framework.StartOurs(env, name, proxierFlags...)
	if err != nil {
		t.Fatal(err)
	}
	// Registered after the chains' removal, so run before it.
	t.Cleanup(func() {
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	})
	if err := framework.WaitSynced(p, start, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(legacyIPTables(t), "-A KUBE-POSTROUTING") {
		t.Fatal("the proxier did not write its chains through iptables-legacy")
	}
	return p
}

func runWithInput(in string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin = strings.NewReader(in)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("%s: %w: %s", args[0], err, out.String())
	}
	return out.String(), err
}

// legacyIPTables is iptables-legacy-save's output.
func legacyIPTables(t *testing.T) string {
	t.Helper()
	out, err := framework.Output("iptables-legacy-save")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// blockedLB is a LoadBalancer on vip whose source ranges leave the node
// out: the node's KUBE-IPVS-OUT-FILTER rule for it is an iptables write no
// other test's Services can have made already.
func blockedLB(ns, clusterIP, vip string, pod *framework.Pod) (*v1.Service, *discovery.EndpointSlice) {
	svc := framework.ClusterIPService(ns, "lb", clusterIP, framework.Port("", v1.ProtocolTCP, 80, 8080))
	svc.Spec.Type, svc.Spec.LoadBalancerSourceRanges = v1.ServiceTypeLoadBalancer, []string{"192.168.45.0/24"}
	svc.Spec.AllocateLoadBalancerNodePorts = new(bool)
	svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: vip}}
	return svc, framework.Slice(ns, "lb", "lb-1", []discovery.EndpointPort{framework.SlicePort("", v1.ProtocolTCP, 8080)},
		framework.Endpoint(pod.IP.String(), "", true))
}

// expectProgrammedWithoutChains waits until vip:80 of a blocked load
// balancer is in IPVS, on kube-ipvs0 and in KUBE-LOAD-BALANCER, and checks
// that its iptables rule is not written (iptables is failing).
func expectProgrammedWithoutChains(t *testing.T, vip string, within time.Duration) {
	t.Helper()
	addr := mustAddr(vip)
	eventually(t, "the load balancer programmed while iptables fails", within, func() error {
		key := ipvs.Key{Address: addr, Protocol: ipvs.TCP, Port: 80}
		if !hasVirtualServer(t, key) || !hasAddress(t, addr) || !hasEntry(t, "KUBE-LOAD-BALANCER", ipset.Entry{IP: addr, Protocol: ipset.EntryTCP, Port: 80}) {
			return fmt.Errorf("virtual server %v, address %v, KUBE-LOAD-BALANCER entry %v", hasVirtualServer(t, key), hasAddress(t, addr),
				hasEntry(t, "KUBE-LOAD-BALANCER", ipset.Entry{IP: addr, Protocol: ipset.EntryTCP, Port: 80}))
		}
		return nil
	})
	if strings.Contains(legacyIPTables(t), "--vaddr "+vip+" ") {
		t.Fatalf("the rule for %s was written through a failing iptables", vip)
	}
}

// TestXtablesLockHeld: another program holds the xtables lock for 60 s.
// Every iptables-restore of the proxier waits 5 s for it (-w 5) and fails.
// A change the chains need (a load balancer the node is kept from) is
// programmed in IPVS, kube-ipvs0 and the sets all the same, and later
// changes are programmed at once: the chains are retried beside the syncs,
// with backoff. /healthz turns 503 once the change has waited past the
// health timeout (two sync periods, 10 s), as upstream's does while its
// iptables-restore fails; once the lock is free the chains catch up within
// the retry cap and /healthz is 200 again.
func TestXtablesLockHeld(t *testing.T) {
	p := legacyProxier(t, "kube-ipvs-proxy-xtables-lock", "")
	const ns = "xtables-lock"
	mustNamespace(t, ns)
	a := mustPod(t, "xlock-a", "10.244.45.1", true)
	client := mustPod(t, "xlock-client", "10.244.45.100", false)
	const restoreFailures = `kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"}`
	failuresBefore := gauge(t, restoreFailures)

	lock, err := os.OpenFile("/run/xtables.lock", os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	unlock := func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }
	defer unlock()

	lb, lbSlice := blockedLB(ns, "10.96.45.10", "10.250.45.1", a)
	mustApply(t, lb, lbSlice)
	// The sync that first meets the lock waits for it once, 5 s.
	expectProgrammedWithoutChains(t, "10.250.45.1", 15*time.Second)
	// Later changes wait for nothing.
	web, webSlice := webService(ns, "10.96.45.11", a)
	mustApply(t, web, webSlice)
	waitAnswerSet(t, client.HTTP, ap("10.96.45.11:80"), "xlock-a", 2, 3*time.Second)
	eventually(t, "/healthz 503 once the change waited past the health timeout", 20*time.Second, func() error {
		if code, body := get(t, "http://127.0.0.1:10256/healthz"); code != 503 {
			return fmt.Errorf("/healthz %d %s", code, body)
		}
		return nil
	})
	if got := gauge(t, restoreFailures); got <= failuresBefore {
		t.Errorf("iptables restore failures %v, were %v", got, failuresBefore)
	}

	time.Sleep(time.Until(locked.Add(60 * time.Second)))
	if strings.Contains(legacyIPTables(t), "--vaddr 10.250.45.1 ") {
		t.Fatal("the rule was written while the lock was held")
	}
	unlock()
	// A retry in flight may be waiting its 5 s for the lock still; the
	// next is at most a sync period (5 s) away.
	eventually(t, "the chains caught up once the lock is free", 20*time.Second, func() error {
		if !strings.Contains(legacyIPTables(t), "--vaddr 10.250.45.1 ") {
			return fmt.Errorf("no KUBE-IPVS-OUT-FILTER rule for 10.250.45.1 yet")
		}
		return nil
	})
	eventually(t, "/healthz 200 again", 10*time.Second, func() error {
		if code, body := get(t, "http://127.0.0.1:10256/healthz"); code != 200 {
			return fmt.Errorf("/healthz %d %s", code, body)
		}
		return nil
	})
	if n := logLines(t, p, "xtables lock"); n == 0 {
		t.Errorf("the lock is named in no log line (see %s)", p.LogPath)
	}
}

// TestIPTablesRestoreHangs: iptables-restore hangs (here it sleeps, in a
// child process). The proxier kills it, child and all, at its deadline
// (15 s and 0.1 s a payload line): the sync that met it waited that once,
// later changes are programmed at once, and the chains catch up once
// iptables-restore answers again.
func TestIPTablesRestoreHangs(t *testing.T) {
	hang := filepath.Join(t.TempDir(), "hang")
	p := legacyProxier(t, "kube-ipvs-proxy-iptables-hangs", hang)
	const ns = "iptables-hangs"
	mustNamespace(t, ns)
	a := mustPod(t, "xhang-a", "10.244.46.1", true)
	client := mustPod(t, "xhang-client", "10.244.46.100", false)
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(hang) })

	lb, lbSlice := blockedLB(ns, "10.96.46.10", "10.250.46.1", a)
	mustApply(t, lb, lbSlice)
	expectProgrammedWithoutChains(t, "10.250.46.1", 30*time.Second)
	web, webSlice := webService(ns, "10.96.46.11", a)
	mustApply(t, web, webSlice)
	waitAnswerSet(t, client.HTTP, ap("10.96.46.11:80"), "xhang-a", 2, 3*time.Second)
	eventually(t, "a hung restore killed at its deadline", 30*time.Second, func() error {
		if logLines(t, p, "killed at its") == 0 {
			return fmt.Errorf("no log line tells of the kill (see %s)", p.LogPath)
		}
		return nil
	})

	if err := os.Remove(hang); err != nil {
		t.Fatal(err)
	}
	// A retry in flight hangs until its own deadline; the next one works.
	eventually(t, "the chains caught up once iptables-restore answers", 40*time.Second, func() error {
		if !strings.Contains(legacyIPTables(t), "--vaddr 10.250.46.1 ") {
			return fmt.Errorf("no KUBE-IPVS-OUT-FILTER rule for 10.250.46.1 yet")
		}
		return nil
	})
	eventually(t, "every hung restore's child killed", 20*time.Second, func() error {
		if n := sleepers(t); n > 0 {
			return fmt.Errorf("%d hung iptables-restore children still run", n)
		}
		return nil
	})
}

// sleepers counts the processes running "sleep 3600" (the hung restores'
// children), zombies left out.
func sleepers(t *testing.T) int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range procs {
		cmdline, err := os.ReadFile(path)
		if err != nil || string(cmdline) != "sleep\x003600\x00" {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join(filepath.Dir(path), "stat")); err == nil && !strings.Contains(string(stat), ") Z ") {
			n++
		}
	}
	return n
}
