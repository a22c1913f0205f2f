package reconciler

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	record(r, "b", state("10.96.0.2", 80, "10.244.0.2:8080", "10.244.0.3:8080"))
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.2:80/TCP 10.244.0.3:8080")

	// Recomputing a Service that did not change writes nothing.
	record(r, "a", state("10.96.0.1", 80, "10.244.0.1:8080"))
	mustSync(t, r)
	fakekernel.ExpectOps(t, k)

	// Deleting a, which carries no connection, deletes its virtual
	// server, address and entries at once (see drainvs.go). Nothing of b
	// is touched.
	record(r, "a", desired.State{})
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "delete-addr 10.96.0.1", "delete-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:80", "delete-entry KUBE-IPVS-IPS 10.96.0.1",
		"delete-vs 10.96.0.1:80/TCP")
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k)
	if got := k.IPVS.Dump(); got != "-A 10.96.0.2:80/TCP -s rr\n-a 10.96.0.2:80/TCP -r 10.244.0.2:8080 -w 1\n-a 10.96.0.2:80/TCP -r 10.244.0.3:8080 -w 1" {
		t.Errorf("ipvs table:\n%s", got)
	}
}

func TestReconcilerRestartAdoptsKernelWithoutWrites(t *testing.T) {
	k, _ := serviceA(t, "10.244.0.1:8080", "10.244.0.2:8080")

	// A new process knows nothing; its first sync is a full one.
	second := testReconciler(k)
	record(second, "a", state("10.96.0.1", 80, "10.244.0.1:8080", "10.244.0.2:8080"))
	mustCheck(t, second)
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
	_ = k.Sets.AddEntry(desired.SetClusterIP, ipset.Entry{IP: netip.MustParseAddr("10.96.9.9"), Protocol: ipset.EntryUDP, Port: 53})
	_ = k.Links.AddAddress(netip.MustParseAddr("10.96.9.9"))
	_ = k.Links.AddAddress(netip.MustParseAddr("10.0.0.5")) // someone else's, on kube-ipvs0
	k.Ops()

	// An incremental sync trusts its picture of the kernel and sees nothing to do.
	mustSync(t, r)
	fakekernel.ExpectOps(t, k)

	// The periodic full sync re-reads the kernel and repairs everything,
	// leaving the excluded range alone.
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k,
		"add-vs 10.96.0.1:80/TCP", "add-rs 10.96.0.1:80/TCP 10.244.0.1:8080", "add-addr 10.96.0.1",
		"delete-vs 10.96.9.9:53/UDP", "delete-entry KUBE-CLUSTER-IP 10.96.9.9,udp:53", "delete-addr 10.96.9.9")
}

func TestReconcilerRetriesFailedWrites(t *testing.T) {
	k := fakekernel.New(t)
	clock := fakekernel.NewClock()
	r := testReconciler(k, clocked(clock))
	k.IPVS.SetHook(oplog.FailOnce("add-rs"))
	record(r, "a", state("10.96.0.1", 80, "10.244.0.1:8080"))
	r.Sync(nil, nil)
	if failed := r.Failed(); len(failed) != 1 || failed[0].Object != "10.96.0.1:80/TCP 10.244.0.1:8080" {
		t.Fatalf("failed %v, want the injected one", failed)
	}
	k.Ops()
	r.Sync(nil, nil)
	fakekernel.ExpectOps(t, k) // not due yet
	clock.Advance(status.RetryFirst)
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.1:80/TCP 10.244.0.1:8080")
}

func TestReconcilerSharedObjectsStayUntilLastOwnerLeaves(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	loop := desired.SetEntry{Set: desired.SetLoopBack, Entry: ipset.Entry{IP: netip.MustParseAddr("10.244.0.1"), Protocol: ipset.EntryTCP, Port: 8080, IP2: netip.MustParseAddr("10.244.0.1")}}
	a, b := state("10.96.0.1", 80), state("10.96.0.2", 80)
	a.Entries = append(a.Entries, loop)
	b.Entries = append(b.Entries, loop)
	record(r, "a", a)
	record(r, "b", b)
	mustSync(t, r)
	k.Ops()
	record(r, "a", desired.State{})
	mustSync(t, r)
	for _, op := range k.Ops() {
		if strings.Contains(op, "KUBE-LOOP-BACK") {
			t.Fatalf("shared entry touched while b still wants it: %s", op)
		}
	}
	record(r, "b", desired.State{})
	mustSync(t, r)
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
	record(r, "a", state("10.96.0.1", 80, "10.244.0.1:8080"))
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "update-rs 10.96.0.1:80/TCP 10.244.0.2:8080 weight=0")

	// It stays while it has connections, and goes once they end.
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k)
	k.IPVS.SetConnections(key, gone, 0, 0)
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k, "delete-rs 10.96.0.1:80/TCP 10.244.0.2:8080")

	// A quiesced server that comes back gets its weight back.
	kept := netip.MustParseAddrPort("10.244.0.1:8080")
	k.IPVS.SetConnections(key, kept, 0, 1) // inactive (TIME_WAIT) counts too
	record(r, "a", state("10.96.0.1", 80))
	mustSync(t, r)
	record(r, "a", state("10.96.0.1", 80, "10.244.0.1:8080"))
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "update-rs 10.96.0.1:80/TCP 10.244.0.1:8080 weight=0", "update-rs 10.96.0.1:80/TCP 10.244.0.1:8080 weight=1")

	// One without connections goes at once, as upstream: no weight-0
	// leftover until a drift check.
	k.IPVS.SetConnections(key, kept, 0, 0)
	record(r, "a", state("10.96.0.1", 80))
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "delete-rs 10.96.0.1:80/TCP 10.244.0.1:8080")
	// White-box: the drain's bookkeeping keeps nothing of it either (no
	// call shows it until the next drift check forgets it).
	if len(r.draining.reals) != 0 {
		t.Errorf("left draining: %v", r.draining.reals)
	}
}

func TestReconcilerAdoptKeepsWritesMadeDuringTheRead(t *testing.T) {
	k, r := serviceA(t, "10.244.0.1:8080")

	// While a drift check reads the kernel, the sync goroutine programs a
	// new Service, which the read has not seen, and someone deletes a's
	// virtual server after the read of the IPVS table.
	duringRead(t, k, func() {
		record(r, "b", state("10.96.0.2", 80, "10.244.0.2:8080"))
		mustSync(t, r)
		k.Ops()
		_ = k.IPVS.DeleteVirtualServer(ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80})
		k.Ops()
	})
	mustCheck(t, r)
	// b is not re-added (the reconciler's belief wins for keys it wrote);
	// a's deletion happened after the read, so it is repaired by the next check.
	fakekernel.ExpectOps(t, k)
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k, "add-vs 10.96.0.1:80/TCP", "add-rs 10.96.0.1:80/TCP 10.244.0.1:8080")
}

func TestReconcilerAdoptRepairsDriftSeenByTheRead(t *testing.T) {
	k, r := serviceA(t, "10.244.0.1:8080")
	_ = k.Links.DeleteAddress(netip.MustParseAddr("10.96.0.1"))
	k.Ops()
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k, "add-addr 10.96.0.1")
}

// writeLog records the writes the kernel is asked for, in the order asked:
// an apply writes the three kinds side by side, so only the order of
// whole applies shows.
type writeLog struct {
	mu  sync.Mutex
	ops []string
}

// hook records op if it is a write, and gives it to then, if not nil.
func (w *writeLog) hook(then oplog.Hook) oplog.Hook {
	return func(op string) error {
		if word, _, _ := strings.Cut(op, "-"); word == "add" || word == "update" || word == "delete" {
			w.mu.Lock()
			w.ops = append(w.ops, op)
			w.mu.Unlock()
		}
		if then == nil {
			return nil
		}
		return then(op)
	}
}

// expect fails t unless the writes since the last call are those of each
// of applies, one apply after the other, each in any order.
func (w *writeLog) expect(t *testing.T, applies ...[]string) {
	t.Helper()
	w.mu.Lock()
	got := w.ops
	w.ops = nil
	w.mu.Unlock()
	var want []string
	at := 0
	for _, a := range applies {
		if end := at + len(a); end <= len(got) {
			slices.Sort(got[at:end])
		}
		want = append(want, slices.Sorted(slices.Values(a))...)
		at += len(a)
	}
	if !slices.Equal(got, want) {
		t.Errorf("writes, in order:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestReconcilerAppliesCriticalServicesFirst(t *testing.T) {
	k := fakekernel.New(t)
	clock := fakekernel.NewClock()
	r := testReconciler(k, clocked(clock))
	record(r, "a", state("10.96.0.10", 80, "10.244.0.1:8080"))
	record(r, "kubernetes", state("10.96.0.1", 443, "10.0.2.100:6443"))
	record(r, "b", state("10.96.0.11", 80, "10.244.0.2:8080"))
	critical := []types.NamespacedName{testobj.Name("kubernetes"), testobj.Name("absent")}

	// The critical Service's objects are written before any other's; its
	// real server fails.
	var w writeLog
	k.SetHook(w.hook(oplog.FailOnce("add-rs 10.96.0.1:443")))
	r.Sync(critical, nil)
	w.expect(t, []string{"add-addr 10.96.0.1", "add-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:443", "add-entry KUBE-IPVS-IPS 10.96.0.1",
		"add-vs 10.96.0.1:443/TCP", "add-rs 10.96.0.1:443/TCP 10.0.2.100:6443"},
		[]string{"add-addr 10.96.0.10", "add-entry KUBE-CLUSTER-IP 10.96.0.10,tcp:80", "add-entry KUBE-IPVS-IPS 10.96.0.10",
			"add-vs 10.96.0.10:80/TCP", "add-rs 10.96.0.10:80/TCP 10.244.0.1:8080",
			"add-addr 10.96.0.11", "add-entry KUBE-CLUSTER-IP 10.96.0.11,tcp:80", "add-entry KUBE-IPVS-IPS 10.96.0.11",
			"add-vs 10.96.0.11:80/TCP", "add-rs 10.96.0.11:80/TCP 10.244.0.2:8080"})
	if failed := r.Failed(); len(failed) != 1 || failed[0].Object != "10.96.0.1:443/TCP 10.0.2.100:6443" {
		t.Fatalf("failed %v; want the injected failure", failed)
	}

	// The failed real server stays pending, and once its retry is due it
	// goes first, before another Service's change.
	record(r, "b", state("10.96.0.11", 80, "10.244.0.2:8080", "10.244.0.3:8080"))
	r.Sync(critical, nil)
	w.expect(t, []string{"add-rs 10.96.0.11:80/TCP 10.244.0.3:8080"})
	clock.Advance(status.RetryFirst)
	record(r, "b", state("10.96.0.11", 80, "10.244.0.2:8080", "10.244.0.3:8080", "10.244.0.4:8080"))
	r.Sync(critical, nil)
	w.expect(t, []string{"add-rs 10.96.0.1:443/TCP 10.0.2.100:6443"}, []string{"add-rs 10.96.0.11:80/TCP 10.244.0.4:8080"})

	// None of its objects is left to write: it is programmed.
	if st := r.State(testobj.Name("kubernetes")); !st.Services[0].Programmed.Equal(clock.Now()) || len(r.Failed()) != 0 {
		t.Errorf("after its retry the critical Service is %+v, failed %v; want programmed now", st.Services[0], r.Failed())
	}
}

func TestReconcilerDrainWaitsWhenTheVirtualServerChangedDuringTheRead(t *testing.T) {
	k, r := serviceA(t, "10.244.0.1:8080", "10.244.0.2:8080")
	key := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	k.IPVS.SetConnections(key, netip.MustParseAddrPort("10.244.0.2:8080"), 1, 0)
	record(r, "a", state("10.96.0.1", 80, "10.244.0.1:8080"))
	mustSync(t, r)
	k.Ops()

	// The read sees the quiesced server idle, but the virtual server is
	// written while the read is in flight: its counters may be stale.
	k.IPVS.SetConnections(key, netip.MustParseAddrPort("10.244.0.2:8080"), 0, 0)
	duringRead(t, k, func() {
		record(r, "a", state("10.96.0.1", 80, "10.244.0.1:8080", "10.244.0.3:8080"))
		mustSync(t, r)
	})
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.1:80/TCP 10.244.0.3:8080")

	// The next drift check deletes it.
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k, "delete-rs 10.96.0.1:80/TCP 10.244.0.2:8080")
}

// skippingRead is an IPVS table whose list of virtual servers and table
// read leave out those in vs and the real servers in real, as a dump
// resumed by position while the table changes may; requests for one
// virtual server see them all.
type skippingRead struct {
	*ipvs.Fake
	vs   map[ipvs.Key]bool
	real map[netip.AddrPort]bool
}

func (s *skippingRead) VirtualServers() ([]ipvs.VirtualServer, error) {
	all, err := s.Fake.VirtualServers()
	return slices.DeleteFunc(all, func(vs ipvs.VirtualServer) bool { return s.vs[vs.Key] }), err
}

func (s *skippingRead) AllRealServers() (map[ipvs.Key][]ipvs.RealServer, error) {
	all, err := s.Fake.AllRealServers()
	for k, reals := range all {
		all[k] = slices.DeleteFunc(reals, func(rs ipvs.RealServer) bool { return s.real[rs.ID()] })
	}
	return all, err
}

func TestReconcilerConfirmsWhatAReadMissed(t *testing.T) {
	k := fakekernel.New(t)
	table := &skippingRead{Fake: k.IPVS}
	r := New(Kernel{IPVS: table, Links: k.Links, Sets: k.Sets}, testOptions())
	record(r, "a", state("10.96.0.1", 80, "10.244.0.1:8080", "10.244.0.2:8080"))
	record(r, "b", state("10.96.0.2", 80, "10.244.0.3:8080"))
	mustSync(t, r)
	k.Ops()

	// A dump resumed by position while the table changed skips a real
	// server of one virtual server and the whole of another.
	a := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	b := ipvs.Key{Address: netip.MustParseAddr("10.96.0.2"), Protocol: ipvs.TCP, Port: 80}
	table.vs, table.real = map[ipvs.Key]bool{b: true}, map[netip.AddrPort]bool{netip.MustParseAddrPort("10.244.0.2:8080"): true}
	var w writeLog
	k.IPVS.SetHook(w.hook(nil))
	mustCheck(t, r)
	w.expect(t) // nothing was missing: no "file exists" repairs, not even tried
	table.vs, table.real = nil, nil

	// Real drift is still repaired.
	if err := k.IPVS.DeleteRealServer(a, netip.MustParseAddrPort("10.244.0.2:8080")); err != nil {
		t.Fatal(err)
	}
	k.Ops()
	mustCheck(t, r)
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
		record(r, fmt.Sprint(i), state(fmt.Sprintf("10.96.%d.%d", i>>8, i&0xff), 80, reals...))
	}
	mustSync(t, r)
	if got := len(k.IPVS.TakeOps()); got != 11*n {
		t.Fatalf("%d IPVS writes, want %d", got, 11*n)
	}
	// A Service is programmed once none of its objects is dirty.
	for _, s := range r.State().Services {
		if s.Programmed.IsZero() {
			t.Fatalf("%s has objects still dirty", s.Name)
		}
	}
}

func TestReconcilerAdoptLetsSyncsRunBetweenSlices(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k, tuneReads(0, 1))
	record(r, "a", state("10.96.0.1", 80, "10.244.0.1:8080"))
	record(r, "b", state("10.96.0.2", 80, "10.244.0.2:8080"))
	record(r, "d", state("10.96.0.4", 80, "10.244.0.5:8080"))
	mustSync(t, r)
	// Drift the read will see.
	if err := k.IPVS.DeleteRealServer(ipvs.Key{Address: netip.MustParseAddr("10.96.0.4"), Protocol: ipvs.TCP, Port: 80},
		netip.MustParseAddrPort("10.244.0.5:8080")); err != nil {
		t.Fatal(err)
	}
	k.Ops()

	// White-box: adopt's pause is where it lets a sync in, which no call
	// shows deterministically; the test is adopt's, given pause.
	r.beginRead()
	v, err := r.readKernel()
	if err != nil {
		t.Fatal(err)
	}
	// While adopt pauses, a sync changes a, deletes b and adds c: the read
	// has a's old real server, has b and lacks c, and must undo none of it.
	// The sync runs at adopt's first pause, as a sync waiting for r.mu
	// would: the pause releases r.mu, as pacer's does.
	ran := false
	pause := func() {
		if ran {
			return
		}
		ran = true
		r.mu.Unlock()
		defer r.mu.Lock()
		record(r, "a", state("10.96.0.1", 80, "10.244.0.3:8080"))
		record(r, "b", desired.State{})
		record(r, "c", state("10.96.0.3", 80, "10.244.0.4:8080"))
		mustSync(t, r)
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
	mustSyncRead(t, r, &CheckResult{view: v, written: w})
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.4:80/TCP 10.244.0.5:8080")
	// a's old real server and b, idle, went at once in that sync; the
	// next drift check finds nothing to do.
	mustCheck(t, r)
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

// Under the race detector: a drift check on its own goroutine, its adopt
// sharing a mutex with syncs that add and delete Services and real
// servers, ends with the belief right, so the next drift check writes
// nothing and the kernel is as a reconciler that never adopted would have
// made it.
func TestReconcilerAdoptBesideSyncs(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k, tuneReads(0, 2))
	final := map[int]desired.State{}
	for i := 1; i <= 50; i++ {
		final[i] = numbered(i, 2)
		record(r, fmt.Sprint(i), final[i])
	}
	mustSync(t, r)

	// The check's read waits for the first sync before it lists the last
	// set, so that the syncs run beside the rest of its read and its adopt.
	first := make(chan struct{})
	last := "list-entries " + desired.IPv4Sets[len(desired.IPv4Sets)-1].Name
	k.Sets.SetHook(func(op string) error {
		if op == last {
			<-first
		}
		return nil
	})
	done := make(chan struct{})
	r.StartCheck(nil, func() { close(done) })
	for i := 1; i <= 50; i += 2 {
		if i%4 == 1 {
			final[i] = numbered(i, 3)
		} else {
			final[i] = desired.State{}
		}
		record(r, fmt.Sprint(i), final[i])
		mustSync(t, r)
		if i == 1 {
			close(first)
		}
	}
	<-done
	read := r.CheckDone(true)
	if read.Err != nil {
		t.Fatal(read.Err)
	}
	mustSyncRead(t, r, read)
	k.Ops()
	// The first drift check ends the deleted Services' drain: it deletes
	// their objects and writes nothing else; the next writes nothing.
	mustCheck(t, r)
	for _, op := range k.Ops() {
		vip := regexp.MustCompile(`10\.96\.0\.(\d+)`).FindStringSubmatch(op)
		if !strings.HasPrefix(op, "delete-") || vip == nil || len(final[atoi(t, vip[1])].VirtualServers) > 0 {
			t.Errorf("drift check wrote %q: not the end of a deleted Service's drain", op)
		}
	}
	mustCheck(t, r)
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
