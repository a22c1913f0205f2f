package reconciler

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

func TestReconcilerAppliesOnlyTheChangedService(t *testing.T) {
	k, r := twoServices(t)
	if len(k.Ops()) != 10 {
		t.Fatal("expected two services' worth of writes")
	}

	// One endpoint added to b: exactly one kernel write.
	r.setService(testobj.Name("b"), state("10.96.0.2", 80, "10.244.0.2:8080", "10.244.0.3:8080"))
	mustApply(t, r)
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.2:80/TCP 10.244.0.3:8080")

	// Recomputing a Service that did not change writes nothing.
	r.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.1:8080"))
	mustApply(t, r)
	fakekernel.ExpectOps(t, k)

	// Deleting a, which carries no connection, deletes its virtual
	// server, address and entries at once (see drainvs.go). Nothing of b
	// is touched.
	r.setService(testobj.Name("a"), desired.State{})
	mustApply(t, r)
	fakekernel.ExpectOps(t, k, "delete-addr 10.96.0.1", "delete-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:80", "delete-entry KUBE-IPVS-IPS 10.96.0.1",
		"delete-vs 10.96.0.1:80/TCP")
	mustRefresh(t, r)
	fakekernel.ExpectOps(t, k)
	if got := k.IPVS.Dump(); got != "-A 10.96.0.2:80/TCP -s rr\n-a 10.96.0.2:80/TCP -r 10.244.0.2:8080 -w 1\n-a 10.96.0.2:80/TCP -r 10.244.0.3:8080 -w 1" {
		t.Errorf("ipvs table:\n%s", got)
	}
}

func TestReconcilerRestartAdoptsKernelWithoutWrites(t *testing.T) {
	k, _ := serviceA(t, "10.244.0.1:8080", "10.244.0.2:8080")

	// A new process knows nothing; its first sync is a full one.
	second := testReconciler(k)
	second.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.1:8080", "10.244.0.2:8080"))
	if err := refresh(second); err != nil {
		t.Fatal(err)
	}
	mustApply(t, second)
	fakekernel.ExpectOps(t, k)
}

func TestReconcilerRepairsDriftAndRemovesStrays(t *testing.T) {
	k, r := serviceA(t, "10.244.0.1:8080")

	a := netip.MustParseAddr("10.96.0.1")
	_ = k.IPVS.DeleteVirtualServer(ipvs.Key{Address: a, Protocol: ipvs.TCP, Port: 80})
	_ = k.Links.DeleteAddress(a)
	stray := ipvs.VirtualServer{Key: ipvs.Key{Address: netip.MustParseAddr("10.96.9.9"), Protocol: ipvs.UDP, Port: 53}, Scheduler: "rr"}
	protected := ipvs.VirtualServer{Key: ipvs.Key{Address: netip.MustParseAddr("10.0.0.5"), Protocol: ipvs.TCP, Port: 22}, Scheduler: "rr"}
	_ = k.IPVS.AddVirtualServer(stray)
	_ = k.IPVS.AddVirtualServer(protected)
	_ = k.Sets.AddEntry(desired.SetClusterIP, ipset.Entry{IP: netip.MustParseAddr("10.96.9.9"), Protocol: "udp", Port: 53})
	_ = k.Links.AddAddress(netip.MustParseAddr("10.96.9.9"))
	_ = k.Links.AddAddress(netip.MustParseAddr("10.0.0.5")) // someone else's, on kube-ipvs0
	k.Ops()

	// An incremental apply trusts its picture of the kernel and sees nothing to do.
	mustApply(t, r)
	fakekernel.ExpectOps(t, k)

	// The periodic full sync re-reads the kernel and repairs everything,
	// leaving the excluded range alone.
	mustRefresh(t, r)
	fakekernel.ExpectOps(t, k,
		"add-vs 10.96.0.1:80/TCP", "add-rs 10.96.0.1:80/TCP 10.244.0.1:8080", "add-addr 10.96.0.1",
		"delete-vs 10.96.9.9:53/UDP", "delete-entry KUBE-CLUSTER-IP 10.96.9.9,udp:53", "delete-addr 10.96.9.9")
}

func TestReconcilerRetriesFailedWrites(t *testing.T) {
	k := fakekernel.New(t)
	clock := fakekernel.NewClock()
	r := testReconciler(k, clocked(clock))
	k.IPVS.SetHook(oplog.FailOnce("add-rs"))
	r.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.1:8080"))
	if errs := r.apply(); len(errs) != 1 {
		t.Fatalf("errors %v, want the injected one", errs)
	}
	k.Ops()
	mustApply(t, r)
	fakekernel.ExpectOps(t, k) // not due yet
	clock.Advance(status.RetryFirst)
	mustApply(t, r)
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.1:80/TCP 10.244.0.1:8080")
}

func TestReconcilerSharedObjectsStayUntilLastOwnerLeaves(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	loop := desired.SetEntry{Set: desired.SetLoopBack, Entry: ipset.Entry{IP: netip.MustParseAddr("10.244.0.1"), Protocol: "tcp", Port: 8080, IP2: netip.MustParseAddr("10.244.0.1")}}
	a, b := state("10.96.0.1", 80), state("10.96.0.2", 80)
	a.Entries = append(a.Entries, loop)
	b.Entries = append(b.Entries, loop)
	r.setService(testobj.Name("a"), a)
	r.setService(testobj.Name("b"), b)
	mustApply(t, r)
	k.Ops()
	r.setService(testobj.Name("a"), desired.State{})
	mustApply(t, r)
	for _, op := range k.Ops() {
		if strings.Contains(op, "KUBE-LOOP-BACK") {
			t.Fatalf("shared entry touched while b still wants it: %s", op)
		}
	}
	r.setService(testobj.Name("b"), desired.State{})
	mustApply(t, r)
	if !slices.Contains(k.Ops(), "delete-entry KUBE-LOOP-BACK 10.244.0.1,tcp:8080,10.244.0.1") {
		t.Fatal("shared entry not removed with its last owner")
	}
}

func TestReconcilerGracefulTermination(t *testing.T) {
	k, r := serviceA(t, "10.244.0.1:8080", "10.244.0.2:8080")

	// A removed TCP real server with connections is quiesced, not deleted.
	key := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	gone := netip.MustParseAddrPort("10.244.0.2:8080")
	k.IPVS.SetConnections(key, gone, 1, 3)
	r.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.1:8080"))
	mustApply(t, r)
	fakekernel.ExpectOps(t, k, "update-rs 10.96.0.1:80/TCP 10.244.0.2:8080 weight=0")

	// It stays while it has connections, and goes once they end.
	if err := refresh(r); err != nil {
		t.Fatal(err)
	}
	fakekernel.ExpectOps(t, k)
	k.IPVS.SetConnections(key, gone, 0, 0)
	if err := refresh(r); err != nil {
		t.Fatal(err)
	}
	fakekernel.ExpectOps(t, k, "delete-rs 10.96.0.1:80/TCP 10.244.0.2:8080")

	// A quiesced server that comes back gets its weight back.
	kept := netip.MustParseAddrPort("10.244.0.1:8080")
	k.IPVS.SetConnections(key, kept, 0, 1) // inactive (TIME_WAIT) counts too
	r.setService(testobj.Name("a"), state("10.96.0.1", 80))
	mustApply(t, r)
	r.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.1:8080"))
	mustApply(t, r)
	fakekernel.ExpectOps(t, k, "update-rs 10.96.0.1:80/TCP 10.244.0.1:8080 weight=0", "update-rs 10.96.0.1:80/TCP 10.244.0.1:8080 weight=1")

	// One without connections goes at once, as upstream: no weight-0
	// leftover until a drift check.
	k.IPVS.SetConnections(key, kept, 0, 0)
	r.setService(testobj.Name("a"), state("10.96.0.1", 80))
	mustApply(t, r)
	fakekernel.ExpectOps(t, k, "delete-rs 10.96.0.1:80/TCP 10.244.0.1:8080")
	if len(r.draining.reals) != 0 {
		t.Errorf("left draining: %v", r.draining.reals)
	}
}

func TestReconcilerAdoptKeepsWritesMadeDuringTheRead(t *testing.T) {
	k, r := serviceA(t, "10.244.0.1:8080")

	// A drift check reads the kernel...
	r.beginRead()
	view, err := r.readKernel()
	if err != nil {
		t.Fatal(err)
	}
	// ...while the sync goroutine programs a new Service, which the view
	// cannot contain, and someone deletes a's virtual server after the read.
	r.setService(testobj.Name("b"), state("10.96.0.2", 80, "10.244.0.2:8080"))
	mustApply(t, r)
	k.Ops()
	_ = k.IPVS.DeleteVirtualServer(ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80})
	k.Ops()

	mustAdopt(t, r, view)
	mustApply(t, r)
	// b is not re-added (the reconciler's belief wins for keys it wrote);
	// a's deletion happened after the read, so it is repaired by the next check.
	fakekernel.ExpectOps(t, k)
	mustRefresh(t, r)
	fakekernel.ExpectOps(t, k, "add-vs 10.96.0.1:80/TCP", "add-rs 10.96.0.1:80/TCP 10.244.0.1:8080")
}

func TestReconcilerAdoptRepairsDriftSeenByTheRead(t *testing.T) {
	k, r := serviceA(t, "10.244.0.1:8080")
	_ = k.Links.DeleteAddress(netip.MustParseAddr("10.96.0.1"))
	k.Ops()
	r.beginRead()
	view, err := r.readKernel()
	if err != nil {
		t.Fatal(err)
	}
	mustAdopt(t, r, view)
	mustApply(t, r)
	fakekernel.ExpectOps(t, k, "add-addr 10.96.0.1")
}

func TestReconcilerAppliesCriticalServicesFirst(t *testing.T) {
	k := fakekernel.New(t)
	clock := fakekernel.NewClock()
	r := testReconciler(k, clocked(clock))
	r.setService(testobj.Name("a"), state("10.96.0.10", 80, "10.244.0.1:8080"))
	r.setService(testobj.Name("kubernetes"), state("10.96.0.1", 443, "10.0.2.100:6443"))
	r.setService(testobj.Name("b"), state("10.96.0.11", 80, "10.244.0.2:8080"))
	critical := []types.NamespacedName{testobj.Name("kubernetes"), testobj.Name("absent")}

	k.IPVS.SetHook(oplog.FailOnce("add-rs 10.96.0.1:443"))
	n, errs := r.applyFirst(critical)
	if n != 4 || len(errs) != 1 {
		t.Fatalf("applyFirst = %d objects, errors %v; want 4 objects and the injected error", n, errs)
	}
	fakekernel.ExpectOps(t, k, "add-addr 10.96.0.1", "add-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:443",
		"add-entry KUBE-IPVS-IPS 10.96.0.1", "add-vs 10.96.0.1:443/TCP")

	// The failed real server stays pending, and once its retry is due it
	// goes first.
	if _, errs = r.applyFirst(critical); len(errs) != 0 {
		t.Fatal(errs)
	}
	fakekernel.ExpectOps(t, k)
	clock.Advance(status.RetryFirst)
	n, errs = r.applyFirst(critical)
	if n != 1 || len(errs) != 0 {
		t.Fatalf("retry = %d objects, errors %v; want the one failed virtual server", n, errs)
	}
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.1:443/TCP 10.0.2.100:6443")
	mustApply(t, r)
	fakekernel.ExpectOps(t, k,
		"add-addr 10.96.0.10", "add-entry KUBE-CLUSTER-IP 10.96.0.10,tcp:80", "add-entry KUBE-IPVS-IPS 10.96.0.10",
		"add-vs 10.96.0.10:80/TCP", "add-rs 10.96.0.10:80/TCP 10.244.0.1:8080",
		"add-addr 10.96.0.11", "add-entry KUBE-CLUSTER-IP 10.96.0.11,tcp:80", "add-entry KUBE-IPVS-IPS 10.96.0.11",
		"add-vs 10.96.0.11:80/TCP", "add-rs 10.96.0.11:80/TCP 10.244.0.2:8080")
	if n, _ := r.applyFirst(critical); n != 0 {
		t.Errorf("applyFirst after a full apply found %d objects to write", n)
	}
}

func TestReconcilerDrainWaitsWhenTheVirtualServerChangedDuringTheRead(t *testing.T) {
	k, r := serviceA(t, "10.244.0.1:8080", "10.244.0.2:8080")
	key := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	k.IPVS.SetConnections(key, netip.MustParseAddrPort("10.244.0.2:8080"), 1, 0)
	r.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.1:8080"))
	mustApply(t, r)
	k.Ops()

	// The read sees the quiesced server idle, but the virtual server is
	// written while the read is in flight: its counters may be stale.
	k.IPVS.SetConnections(key, netip.MustParseAddrPort("10.244.0.2:8080"), 0, 0)
	v := mustRead(t, r)
	r.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.1:8080", "10.244.0.3:8080"))
	mustApply(t, r)
	if errs := r.drain(v, mustAdopt(t, r, v)); len(errs) > 0 {
		t.Fatal(errs)
	}
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.1:80/TCP 10.244.0.3:8080")

	// The next drift check deletes it.
	if err := refresh(r); err != nil {
		t.Fatal(err)
	}
	fakekernel.ExpectOps(t, k, "delete-rs 10.96.0.1:80/TCP 10.244.0.2:8080")
}

func TestReconcilerConfirmsWhatAReadMissed(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	r.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.1:8080", "10.244.0.2:8080"))
	r.setService(testobj.Name("b"), state("10.96.0.2", 80, "10.244.0.3:8080"))
	mustApply(t, r)
	k.Ops()

	// A dump resumed by position while the table changed skipped a real
	// server of one virtual server and the whole of another.
	v := mustRead(t, r)
	a := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	b := ipvs.Key{Address: netip.MustParseAddr("10.96.0.2"), Protocol: ipvs.TCP, Port: 80}
	v.vs[a].reals.remove(netip.MustParseAddrPort("10.244.0.2:8080"))
	delete(v.vs, b)
	if errs := r.drain(v, mustAdopt(t, r, v)); len(errs) > 0 {
		t.Fatal(errs)
	}
	mustApply(t, r)
	fakekernel.ExpectOps(t, k) // nothing was missing: no "file exists" repairs

	// Real drift is still repaired.
	if err := k.IPVS.DeleteRealServer(a, netip.MustParseAddrPort("10.244.0.2:8080")); err != nil {
		t.Fatal(err)
	}
	k.Ops()
	mustRefresh(t, r)
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.1:80/TCP 10.244.0.2:8080")
}

func TestReconcilerWritesMoreOpsThanOneWriteHolds(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	n := opsPerWrite/11 + 10 // a virtual server and 10 real servers each
	for i := 0; i < n; i++ {
		var reals []string
		for j := 0; j < 10; j++ {
			reals = append(reals, fmt.Sprintf("10.%d.%d.%d:8080", 100+j, i>>8, i&0xff))
		}
		r.setService(testobj.Name(fmt.Sprint(i)), state(fmt.Sprintf("10.96.%d.%d", i>>8, i&0xff), 80, reals...))
	}
	mustApply(t, r)
	if got := len(k.IPVS.TakeOps()); got != 11*n {
		t.Fatalf("%d IPVS writes, want %d", got, 11*n)
	}
	if len(r.vs.dirty) != 0 {
		t.Fatalf("%d virtual servers still dirty", len(r.vs.dirty))
	}
}

func TestOwnersKeepAnObjectUntilItsLastOwner(t *testing.T) {
	o := owners[string, int]{}
	o.add("vip", testobj.Name("b"), 2)
	o.add("vip", testobj.Name("c"), 3)
	o.add("vip", testobj.Name("b"), 20) // an owner's new value replaces its old one
	if v, ok := o.get("vip"); !ok || v != 20 {
		t.Fatalf("two owners: got %d, %v; want b's latest value 20", v, ok)
	}
	o.remove("vip", testobj.Name("b")) // the inline owner goes; another takes its place
	if v, ok := o.get("vip"); !ok || v != 3 {
		t.Fatalf("after b left: got %d, %v; want c's value 3", v, ok)
	}
	o.remove("vip", testobj.Name("x")) // not an owner: nothing changes
	o.remove("vip", testobj.Name("c"))
	if _, ok := o.get("vip"); ok || len(o) != 0 {
		t.Fatalf("after the last owner left the object is still wanted: %+v", o)
	}
}

func TestReconcilerAdoptLetsSyncsRunBetweenSlices(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k, tuneReads(0, 1))
	r.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.1:8080"))
	r.setService(testobj.Name("b"), state("10.96.0.2", 80, "10.244.0.2:8080"))
	r.setService(testobj.Name("d"), state("10.96.0.4", 80, "10.244.0.5:8080"))
	mustApply(t, r)
	// Drift the read will see.
	if err := k.IPVS.DeleteRealServer(ipvs.Key{Address: netip.MustParseAddr("10.96.0.4"), Protocol: ipvs.TCP, Port: 80},
		netip.MustParseAddrPort("10.244.0.5:8080")); err != nil {
		t.Fatal(err)
	}
	k.Ops()

	v := mustRead(t, r)
	// While adopt pauses, a sync changes a, deletes b and adds c: the read
	// has a's old real server, has b and lacks c, and must undo none of it.
	// The sync runs at adopt's first pause, as a sync waiting for r.mu
	// would.
	ran := false
	pause := func() {
		if ran {
			return
		}
		ran = true
		r.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.3:8080"))
		r.setService(testobj.Name("b"), desired.State{})
		r.setService(testobj.Name("c"), state("10.96.0.3", 80, "10.244.0.4:8080"))
		mustApply(t, r)
		k.Ops()
	}
	r.mu.Lock()
	w, err := r.adopt(v, pause)
	r.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("adopt never paused")
	}
	if errs := r.drain(v, w); len(errs) > 0 {
		t.Fatal(errs)
	}
	mustApply(t, r)
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.4:80/TCP 10.244.0.5:8080")
	// a's old real server and b, idle, went at once in that sync; the
	// next drift check finds nothing to do.
	mustRefresh(t, r)
	fakekernel.ExpectOps(t, k)
	want := strings.Join([]string{
		"-A 10.96.0.1:80/TCP -s rr", "-A 10.96.0.3:80/TCP -s rr", "-A 10.96.0.4:80/TCP -s rr",
		"-a 10.96.0.1:80/TCP -r 10.244.0.3:8080 -w 1", "-a 10.96.0.3:80/TCP -r 10.244.0.4:8080 -w 1",
		"-a 10.96.0.4:80/TCP -r 10.244.0.5:8080 -w 1",
	}, "\n")
	if got := k.IPVS.Dump(); got != want {
		t.Errorf("kernel holds\n%s\nwant\n%s", got, want)
	}
}

// Under the race detector: a background adopt sharing a mutex with syncs
// that add and delete Services and real servers ends with the belief right,
// so the next drift check writes nothing and the kernel is as a reconciler
// that never adopted would have made it.
func TestReconcilerAdoptBesideSyncs(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k, tuneReads(0, 2))
	final := map[int]desired.State{}
	for i := 1; i <= 50; i++ {
		final[i] = numbered(i, 2)
		r.setService(testobj.Name(fmt.Sprint(i)), final[i])
	}
	mustApply(t, r)

	v := mustRead(t, r)
	done := make(chan map[ipvs.Key]bool)
	go func() {
		r.mu.Lock()
		w, err := r.adopt(v, r.pacer(nil))
		r.mu.Unlock()
		if err != nil {
			t.Error(err)
		}
		done <- w
	}()
	for i := 1; i <= 50; i += 2 {
		r.mu.Lock()
		if i%4 == 1 {
			final[i] = numbered(i, 3)
		} else {
			final[i] = desired.State{}
		}
		r.setService(testobj.Name(fmt.Sprint(i)), final[i])
		mustApply(t, r)
		r.mu.Unlock()
	}
	w := <-done
	if errs := r.drain(v, w); len(errs) > 0 {
		t.Fatal(errs)
	}
	mustApply(t, r)
	k.Ops()
	// The first drift check ends the deleted Services' drain: it deletes
	// their objects and writes nothing else; the next writes nothing.
	mustRefresh(t, r)
	for _, op := range k.Ops() {
		vip := regexp.MustCompile(`10\.96\.0\.(\d+)`).FindStringSubmatch(op)
		if !strings.HasPrefix(op, "delete-") || vip == nil || len(final[atoi(t, vip[1])].VirtualServers) > 0 {
			t.Errorf("drift check wrote %q: not the end of a deleted Service's drain", op)
		}
	}
	mustRefresh(t, r)
	fakekernel.ExpectOps(t, k)

	expectKernelOf(t, k, final)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
