//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/view"
)

// TestKillUnderChurn: while 20 Services' endpoints change about 50 times a
// second for a minute, the proxier is killed with SIGKILL and started again
// three seconds later. Three stable Services answer every request
// throughout; none of their addresses leaves kube-ipvs0 and their IPVS
// lines never change (nothing is removed and re-added); every change made
// while the proxier was down is in the kernel once it is back. Serial: it
// kills the shared proxier.
func TestKillUnderChurn(t *testing.T) {
	old := ourProxier(t)
	const ns = "churn"
	mustNamespace(t, ns)
	client := mustPod(t, "churn-client", "10.244.49.200", false)
	var stable []string
	for i := range 3 {
		pod := mustPod(t, fmt.Sprintf("churn-stable-%d", i), fmt.Sprintf("10.244.49.%d", i+1), true)
		vip := fmt.Sprintf("10.96.49.%d", i+1)
		svc, slice := webService(ns, vip, pod)
		svc.Name, slice.Name = fmt.Sprintf("stable-%d", i), fmt.Sprintf("stable-%d-1", i)
		slice.Labels[discovery.LabelServiceName] = svc.Name
		mustApply(t, svc, slice)
		waitAnswerSet(t, client.HTTP, ap(vip+":80"), pod.Name, 2, 30*time.Second)
		stable = append(stable, vip)
	}

	// The churning Services: endpoints that need not answer, only be
	// programmed. last is what each was last given.
	const churners = 20
	var mu sync.Mutex
	last := map[string][]string{}
	churnSlice := func(i, round int) (*v1.Service, *discovery.EndpointSlice, []string) {
		name := fmt.Sprintf("churn-%d", i)
		var ips []string
		for j := range 1 + (round+i)%4 {
			ips = append(ips, fmt.Sprintf("10.244.50.%d", 1+(round+i+j*7)%250))
		}
		svc, slice := webService(ns, fmt.Sprintf("10.96.49.%d", 100+i))
		svc.Name, slice.Name = name, name+"-1"
		slice.Labels[discovery.LabelServiceName] = name
		for _, ip := range ips {
			slice.Endpoints = append(slice.Endpoints, framework.Endpoint(ip, "", true))
		}
		return svc, slice, ips
	}
	for i := range churners {
		svc, slice, ips := churnSlice(i, 0)
		mustApply(t, svc, slice)
		last[svc.Spec.ClusterIP] = ips
	}

	removed := watchRemovedAddresses(t, stable)
	lines := stableLines(t, stable)
	before := map[string]int{}
	time.Sleep(counterSettle)
	for _, vip := range stable {
		before[vip] = vsConnections(t, vip+":80")
	}

	stop := make(chan struct{})
	var workers sync.WaitGroup
	var changes, changeErrs atomic.Int64
	// 50 changes a second, from writers enough to keep that pace while an
	// API write from the emulated VM takes up to 400 ms (10 writers made
	// 27 a second on a slow day). Each change is one merge patch of the
	// slice's endpoints, not a read and a write.
	const writers = 20
	pace := time.NewTicker(20 * time.Millisecond)
	defer pace.Stop()
	for w := range writers {
		workers.Go(func() {
			for round := 1; ; round++ {
				for i := w; i < churners; i += writers {
					select {
					case <-stop:
						return
					case <-pace.C:
					}
					_, slice, ips := churnSlice(i, round)
					if err := patchEndpoints(slice); err != nil {
						changeErrs.Add(1)
						continue
					}
					changes.Add(1)
					mu.Lock()
					last[fmt.Sprintf("10.96.49.%d", 100+i)] = ips
					mu.Unlock()
				}
			}
		})
	}
	n := 0
	stopClient := clientLoop(20*time.Millisecond, func() error {
		n++
		_, err := client.HTTP(ap(stable[n%len(stable)]+":80"), 2*time.Second)
		return err
	})

	time.Sleep(25 * time.Second)
	old.Kill()
	killedAt := changes.Load()
	// A Service created while no proxier runs.
	late, lateSlice := webService(ns, "10.96.49.99", &framework.Pod{Name: "churn-stable-0", IP: mustAddr("10.244.49.1")})
	late.Name, lateSlice.Name = "late", "late-1"
	lateSlice.Labels[discovery.LabelServiceName] = "late"
	mustApply(t, late, lateSlice)
	time.Sleep(3 * time.Second)
	restarted := time.Now()
	p, err := framework.StartOurs(env, "kube-ipvs-proxy", proxierFlags...)
	if err != nil {
		t.Fatal(err)
	}
	replaceProxier(t, p)
	if err := framework.WaitSynced(p, restarted, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	downChanges := changes.Load() - killedAt
	time.Sleep(time.Until(restarted.Add(32 * time.Second)))
	close(stop)
	workers.Wait()
	seen := stopClient()
	elapsed := time.Since(restarted) + 28*time.Second
	t.Logf("%d endpoint changes in %s (%.0f/s), %d while the proxier was down, %d refused by the apiserver; %d requests to the stable Services, %d failed",
		changes.Load(), elapsed.Round(time.Second), float64(changes.Load())/elapsed.Seconds(), downChanges, changeErrs.Load(), seen.requests, seen.failed)

	// The pace falls short of 50: the writers share the emulated VM's CPUs
	// with the proxier's syncs (39 a second here, 26 on CI's machine with a
	// read before each write). 20 is still churn.
	if rate := float64(changes.Load()) / elapsed.Seconds(); rate < 20 {
		t.Errorf("only %.0f changes/s: not the churn this test is meant to run under", rate)
	}
	if seen.failed > 0 {
		t.Errorf("%d of %d requests to the stable Services failed; first: %v", seen.failed, seen.requests, seen.first)
	}
	if got := removed(); len(got) > 0 {
		t.Errorf("stable addresses left kube-ipvs0: %q", got)
	}
	if changed := lines(); len(changed) > 0 {
		t.Errorf("the stable Services' IPVS lines changed: %q", changed)
	}
	time.Sleep(counterSettle)
	for _, vip := range stable {
		if after := vsConnections(t, vip+":80"); after < before[vip] {
			t.Errorf("%s's connection counter went from %d to %d: its virtual server was re-created", vip, before[vip], after)
		}
	}
	waitAnswerSet(t, client.HTTP, ap("10.96.49.99:80"), "churn-stable-0", 2, 30*time.Second)
	eventually(t, "every churned Service's last endpoints programmed", 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for vip, ips := range last {
			rs, err := realServers(t, ipvs.Key{Address: mustAddr(vip), Protocol: ipvs.TCP, Port: 80})
			if err != nil {
				return err
			}
			var active []string
			for _, r := range rs {
				if addr, weight, ok := strings.Cut(r, "/"); ok && weight != "0" {
					active = append(active, strings.TrimSuffix(addr, ":8080"))
				}
			}
			slices.Sort(active)
			want := slices.Sorted(slices.Values(ips))
			if !slices.Equal(active, want) {
				return fmt.Errorf("%s: real servers %v, want %v", vip, rs, want)
			}
		}
		return nil
	})
}

// patchEndpoints replaces the stored slice's endpoints with slice's in one
// request.
func patchEndpoints(slice *discovery.EndpointSlice) error {
	patch, err := json.Marshal(map[string]any{"endpoints": slice.Endpoints})
	if err != nil {
		return err
	}
	ctx, cancel := framework.Ctx()
	defer cancel()
	_, err = env.Admin.DiscoveryV1().EndpointSlices(slice.Namespace).Patch(ctx, slice.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// watchRemovedAddresses watches kube-ipvs0 for any of vips (nil: any
// address) going away, and returns a function that ends the watch and
// lists the removals.
func watchRemovedAddresses(t *testing.T, vips []string) func() []string {
	t.Helper()
	monitor := exec.Command("ip", "-o", "monitor", "address")
	out, _ := monitor.StdoutPipe()
	if err := monitor.Start(); err != nil {
		t.Fatal(err)
	}
	var removed []string
	var done sync.WaitGroup
	done.Go(func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			l := sc.Text()
			if !strings.HasPrefix(l, "Deleted") || !strings.Contains(l, "kube-ipvs0") {
				continue
			}
			if vips == nil || slices.ContainsFunc(vips, func(v string) bool { return strings.Contains(l, " "+v+"/") }) {
				removed = append(removed, l)
			}
		}
	})
	return func() []string {
		_ = monitor.Process.Kill()
		_ = monitor.Wait()
		done.Wait()
		return removed
	}
}

// stableLines samples ipvsadm's lines for vips four times a second and
// returns a function that ends the sampling and lists each sample that
// differed from the first.
func stableLines(t *testing.T, vips []string) func() []string {
	t.Helper()
	read := func() string {
		out, err := framework.Output("ipvsadm", "-Ln")
		if err != nil {
			return "ipvsadm: " + err.Error()
		}
		var keep []string
		in := false
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) >= 2 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP"):
				in = slices.ContainsFunc(vips, func(v string) bool { return f[1] == v+":80" })
				if in {
					keep = append(keep, f[0]+" "+f[1])
				}
			case in && len(f) >= 4 && f[0] == "->":
				keep = append(keep, f[1]+" "+f[3]) // address and weight
			}
		}
		return strings.Join(keep, "; ")
	}
	first := read()
	stop := make(chan struct{})
	var changed []string
	var done sync.WaitGroup
	done.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			if now := read(); now != first {
				changed = append(changed, now)
			}
		}
	})
	return func() []string {
		close(stop)
		done.Wait()
		return changed
	}
}

// TestForeignWriterFillsASet: another program fills KUBE-CLUSTER-IP to its
// maxelem. A new Service is still programmed (its virtual server and
// address, and it answers); its set entry is either written into a grown
// set or reported as a failed object and retried, and once the drift check
// has removed the foreign entries (as upstream's sync removes entries no
// Service wants) it is in the set. Another Service answers throughout.
// Serial: every test's cluster IP entry goes into that set.
func TestForeignWriterFillsASet(t *testing.T) {
	ourProxier(t)
	const ns = "fullset"
	mustNamespace(t, ns)
	a := mustPod(t, "fullset-a", "10.244.51.1", true)
	client := mustPod(t, "fullset-client", "10.244.51.100", false)
	old, oldSlice := webService(ns, "10.96.51.10", a)
	mustApply(t, old, oldSlice)
	waitAnswerSet(t, client.HTTP, ap("10.96.51.10:80"), "fullset-a", 2, 30*time.Second)

	maxelem, have := setHeader(t, "KUBE-CLUSTER-IP")
	if maxelem == 0 {
		t.Fatal("no maxelem in the header of KUBE-CLUSTER-IP")
	}
	var fill strings.Builder
	for i := range maxelem - have {
		fmt.Fprintf(&fill, "add KUBE-CLUSTER-IP 10.%d.%d.%d,tcp:1\n", 200+i>>16, i>>8&255, i&255)
	}
	restore := exec.Command("ipset", "restore", "-exist")
	restore.Stdin = strings.NewReader(fill.String())
	if out, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("filling the set: %v: %s", err, out)
	}
	t.Logf("KUBE-CLUSTER-IP filled with %d foreign entries to its maxelem %d", maxelem-have, maxelem)
	// Whether the kernel now refuses an add, as the proxier's next one
	// meets it.
	if out, err := exec.Command("ipset", "add", "KUBE-CLUSTER-IP", "10.99.99.99,tcp:1").CombinedOutput(); err == nil {
		t.Logf("the kernel took one more entry past maxelem %d", maxelem)
		_ = exec.Command("ipset", "del", "KUBE-CLUSTER-IP", "10.99.99.99,tcp:1").Run()
	} else {
		t.Logf("the kernel refuses one more entry: %s", strings.TrimSpace(string(out)))
	}

	stop := clientLoop(50*time.Millisecond, func() error {
		_, err := client.HTTP(ap("10.96.51.10:80"), 2*time.Second)
		return err
	})
	fresh, freshSlice := webService(ns, "10.96.51.11", a)
	fresh.Name, freshSlice.Name = "fresh", "fresh-1"
	freshSlice.Labels[discovery.LabelServiceName] = "fresh"
	mustApply(t, fresh, freshSlice)
	waitAnswerSet(t, client.HTTP, ap("10.96.51.11:80"), "fullset-a", 2, 30*time.Second)
	entry := ipset.Entry{IP: mustAddr("10.96.51.11"), Protocol: ipset.EntryTCP, Port: 80}
	refused := false // the entry reported as a failed object meanwhile
	eventually(t, "the new entry in the set, the foreign ones gone", 60*time.Second, func() error {
		if n, err := framework.Scrape(); err == nil && n[`kube_ipvs_proxy_failed_objects{kind="set_entry"}`] > 0 {
			refused = true
		}
		if !hasEntry(t, "KUBE-CLUSTER-IP", entry) {
			return fmt.Errorf("no entry %v", entry)
		}
		out, err := framework.Output("ipset", "list", "-t", "KUBE-CLUSTER-IP")
		if err != nil {
			return err
		}
		t.Logf("the entry is in; the set's header: %s", strings.Join(strings.Fields(out), " "))
		if strings.Contains(out, fmt.Sprintf("Number of entries: %d\n", maxelem)) {
			return fmt.Errorf("the set still holds %d entries", maxelem)
		}
		return nil
	})
	t.Logf("the entry was reported as a failed object meanwhile: %v", refused)
	if seen := stop(); seen.failed > 0 {
		t.Errorf("%d of %d requests to the other Service failed; first: %v", seen.failed, seen.requests, seen.first)
	}
	if got, err := framework.Metric("kube_ipvs_proxy_failed_objects"); err != nil {
		t.Error(err)
	} else {
		for _, v := range got {
			if v != 0 {
				t.Errorf("failed objects left: %v", got)
			}
		}
	}
}

// TestAFullSetRefusesAnEntry: with no drift check due (a sync period of an
// hour), another program fills KUBE-CLUSTER-IP until the kernel refuses
// any add (fillSet). A new Service's entry is refused: it is reported as a
// failed object (one log line) and retried alone, while its virtual server
// and address are programmed (without its entry KUBE-IPVS-FILTER refuses
// new connections to it, as upstream's would) and another Service answers
// throughout. Once the foreign entries go, a retry writes the entry, the
// new Service answers, and nothing is left failed. Serial: it replaces the
// shared proxier.
func TestAFullSetRefusesAnEntry(t *testing.T) {
	old := ourProxier(t)
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}
	replaceProxier(t, nil)
	start := time.Now()
	p, err := framework.StartOurs(env, "kube-ipvs-proxy-full-set", append(slices.Clone(proxierFlags), "--ipvs-sync-period", "1h")...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop() }) // the next test starts a shared one again
	if err := framework.WaitSynced(p, start, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	const ns = "refusedentry"
	mustNamespace(t, ns)
	a := mustPod(t, "refused-a", "10.244.52.1", true)
	client := mustPod(t, "refused-client", "10.244.52.100", false)
	other, otherSlice := webService(ns, "10.96.52.10", a)
	mustApply(t, other, otherSlice)
	waitAnswerSet(t, client.HTTP, ap("10.96.52.10:80"), "refused-a", 2, 30*time.Second)
	// An earlier test's foreign entries may still be going: counted now
	// and removed after, they would leave room in the filled set.
	eventually(t, "KUBE-CLUSTER-IP holds the Services' entries only", 60*time.Second, func() error {
		if _, n := setHeader(t, "KUBE-CLUSTER-IP"); n > 1000 {
			return fmt.Errorf("%d entries", n)
		}
		return nil
	})

	foreign := fillSet(t, "KUBE-CLUSTER-IP")
	t.Cleanup(func() { _ = ksets.DeleteEntries("KUBE-CLUSTER-IP", foreign) })
	stop := clientLoop(50*time.Millisecond, func() error {
		_, err := client.HTTP(ap("10.96.52.10:80"), 2*time.Second)
		return err
	})
	fresh, freshSlice := webService(ns, "10.96.52.11", a)
	fresh.Name, freshSlice.Name = "fresh", "fresh-1"
	freshSlice.Labels[discovery.LabelServiceName] = "fresh"
	mustApply(t, fresh, freshSlice)
	const failedEntries = `kube_ipvs_proxy_failed_objects{kind="set_entry"}`
	eventually(t, "the refused entry reported as a failed object", 30*time.Second, func() error {
		if n, err := framework.Scrape(); err != nil || n[failedEntries] < 1 {
			return fmt.Errorf("%s = %v (%v)", failedEntries, n[failedEntries], err)
		}
		return nil
	})
	entry := ipset.Entry{IP: mustAddr("10.96.52.11"), Protocol: ipset.EntryTCP, Port: 80}
	if hasEntry(t, "KUBE-CLUSTER-IP", entry) {
		t.Fatal("the entry is in a full set")
	}
	if !hasVirtualServer(t, ipvs.Key{Address: entry.IP, Protocol: ipvs.TCP, Port: 80}) || !hasAddress(t, entry.IP) {
		t.Error("the Service's virtual server or address waits for its refused entry")
	}
	// status names the refused entry with its error and next retry, and exits 1.
	out, code := runOurs(t, "status", "-o", "json", "--service", ns+"/fresh")
	var st view.State
	if err := json.Unmarshal([]byte(out), &st); code != 1 || err != nil || len(st.Services) != 1 {
		t.Fatalf("status -o json: exit %d (want 1), %v:\n%s", code, err, out)
	}
	if f := st.Services[0].Failed; len(f) != 1 || f[0].Kind != status.KindSetEntry || !strings.Contains(f[0].Object, "10.96.52.11") ||
		f[0].Err == nil || f[0].RetryAt.IsZero() {
		t.Errorf("status of %s/fresh: failed objects %+v; want its KUBE-CLUSTER-IP entry, with error and retry", ns, f)
	}
	if out, code := runOurs(t, "status", "--service", ns+"/fresh"); code != 1 || !strings.Contains(out, "set_entry") {
		t.Errorf("status: exit %d (want 1), no set_entry in:\n%s", code, out)
	}

	for _, err := range ksets.DeleteEntries("KUBE-CLUSTER-IP", foreign) {
		if err != nil {
			t.Fatalf("emptying the set: %v", err)
		}
	}
	eventually(t, "the entry written by a retry, nothing failed", 90*time.Second, func() error {
		if !hasEntry(t, "KUBE-CLUSTER-IP", entry) {
			return fmt.Errorf("no entry %v", entry)
		}
		if n, err := framework.Scrape(); err != nil || n[failedEntries] != 0 {
			return fmt.Errorf("%s = %v (%v)", failedEntries, n[failedEntries], err)
		}
		return nil
	})
	waitAnswerSet(t, client.HTTP, ap("10.96.52.11:80"), "refused-a", 2, 30*time.Second)
	if seen := stop(); seen.failed > 0 {
		t.Errorf("%d of %d requests to the other Service failed; first: %v", seen.failed, seen.requests, seen.first)
	}
	if n := logLines(t, p, "kernel refused an object", "10.96.52.11"); n != 1 {
		t.Errorf("%d warning lines for the refused entry, want one however often it is retried", n)
	}
}

// setHeader reads an ipset's maxelem and entry count from its header.
func setHeader(t *testing.T, set string) (maxelem, entries int) {
	t.Helper()
	header, err := framework.Output("ipset", "list", "-t", set)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(header, "\n") {
		if _, rest, ok := strings.Cut(l, "maxelem "); ok {
			fmt.Sscanf(rest, "%d", &maxelem)
		}
		if n, ok := strings.CutPrefix(l, "Number of entries: "); ok {
			fmt.Sscanf(n, "%d", &entries)
		}
	}
	return maxelem, entries
}

// fillSet adds foreign entries to a hash set until the kernel refuses every
// add, and returns those it took. Reaching maxelem is not enough: a hash
// set's table is cut into regions, and the kernel counts the whole set only
// when an add lands in a region over its share of maxelem, so a set at
// maxelem still takes entries that hash into emptier regions. A whole
// batch refused means every region is over its share.
func fillSet(t *testing.T, set string) []ipset.Entry {
	t.Helper()
	kernelIPVS(t)
	maxelem, have := setHeader(t, set)
	if maxelem == 0 {
		t.Fatalf("no maxelem in the header of %s", set)
	}
	var added []ipset.Entry
	next := 0 // foreign entries are 10.150.0.0 on, port 1
	batch := maxelem - have
	for round := 0; ; round++ {
		if round == 50 {
			t.Fatalf("%s still takes entries after %d foreign ones", set, len(added))
		}
		entries := make([]ipset.Entry, max(batch, 4096))
		for i := range entries {
			n := next + i
			entries[i] = ipset.Entry{IP: netip.AddrFrom4([4]byte{10, byte(150 + n>>16), byte(n >> 8), byte(n)}), Protocol: ipset.EntryTCP, Port: 1}
		}
		next += len(entries)
		took := 0
		for i, err := range ksets.AddEntries(set, entries) {
			if err == nil {
				added = append(added, entries[i])
				took++
			}
		}
		if took == 0 {
			break
		}
		batch = 0
	}
	_, n := setHeader(t, set)
	t.Logf("%s filled: %d foreign entries, %d in all, maxelem %d", set, len(added), n, maxelem)
	return added
}
