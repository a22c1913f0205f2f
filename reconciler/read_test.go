package reconciler

// Tests of the drift check's reads: whole tables, shares of large ones, set
// counts, and their interplay with syncs' writes.

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

func TestReconcilerReadsSmallTablesInOneRead(t *testing.T) {
	k, r := twoServices(t)
	k.Ops()

	// a's real server goes behind the proxier's back; the table read
	// misses b's virtual server, whose real server is in place.
	a := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	b := ipvs.Key{Address: netip.MustParseAddr("10.96.0.2"), Protocol: ipvs.TCP, Port: 80}
	_ = k.IPVS.DeleteRealServer(a, netip.MustParseAddrPort("10.244.0.1:8080"))
	k.IPVS.TableMisses = map[ipvs.Key]bool{b: true}
	var reads oplog.Counter
	k.IPVS.SetHook(reads.Hook)
	k.Ops()
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.1:80/TCP 10.244.0.1:8080")
	if n := reads.Of("read-table"); n != 1 {
		t.Fatalf("%d table reads, want 1", n)
	}

	// A large table is dumped per virtual server: its read is quadratic.
	for i := range tableReadMax {
		vs := ipvs.VirtualServer{Key: ipvs.Key{Address: netip.AddrFrom4([4]byte{10, 97, byte(i >> 8), byte(i)}), Protocol: ipvs.TCP, Port: 80}, Scheduler: "rr"}
		if err := k.IPVS.AddVirtualServer(vs); err != nil {
			t.Fatal(err)
		}
	}
	mustCheck(t, r)
	if n := reads.Of("read-table"); n != 1 {
		t.Fatalf("%d table reads of %d virtual servers, want none", n-1, tableReadMax+2)
	}
}

// Above dumpsMax, only one check in shares lists the virtual servers; the
// others read their share by its real servers. Drift of every kind is still
// repaired within shares checks, and a converged table costs no writes.
func TestReconcilerListsLargeTablesEveryFewChecks(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k, tuneReads(2, 0))
	c := dumpsOnly(k)
	var keys []ipvs.Key
	for i := range 6 {
		vip := fmt.Sprintf("10.96.0.%d", i+1)
		st := state(vip, 80, fmt.Sprintf("10.244.0.%d:8080", i+1))
		if i == 5 {
			st = state(vip, 80) // no endpoints: its real-server dump is empty
		}
		record(r, vip, st)
		keys = append(keys, ipvs.Key{Address: netip.MustParseAddr(vip), Protocol: ipvs.TCP, Port: 80})
	}
	mustSync(t, r)
	refresh := func() { mustCheck(t, r) }
	refresh() // the first read lists everything
	k.Ops()
	c.Reset()
	for range 3 {
		refresh()
	}
	if n := c.Of("list-vs"); n != 1 {
		t.Errorf("three checks of a table in three shares listed it %d times, want 1", n)
	}
	if n := c.Of("get-vs"); n > 1 {
		t.Errorf("converged checks got %d virtual servers one by one; only the one without real servers needs it", n)
	}
	fakekernel.ExpectOps(t, k)

	// Drift of each kind, behind the reconciler's back.
	_ = k.IPVS.DeleteVirtualServer(keys[1])
	_ = k.IPVS.DeleteVirtualServer(keys[5])
	changed := ipvs.VirtualServer{Key: keys[2], Scheduler: "wrr"}
	_ = k.IPVS.UpdateVirtualServer(changed)
	stray := ipvs.Key{Address: netip.MustParseAddr("10.96.0.99"), Protocol: ipvs.TCP, Port: 80}
	_ = k.IPVS.AddVirtualServer(ipvs.VirtualServer{Key: stray, Scheduler: "rr"})
	k.Ops()
	for range 3 {
		refresh()
	}
	fakekernel.ExpectOps(t, k,
		"add-vs 10.96.0.2:80/TCP", "add-rs 10.96.0.2:80/TCP 10.244.0.2:8080",
		"add-vs 10.96.0.6:80/TCP",
		"update-vs 10.96.0.3:80/TCP",
		"delete-vs 10.96.0.99:80/TCP")
	for range 3 {
		refresh()
	}
	fakekernel.ExpectOps(t, k)
}

func TestReconcilerDumpsAShareOfLargeTables(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k, tuneReads(2, 0))
	d := dumpsOnly(k)
	var keys []ipvs.Key
	for i := range 6 {
		vip := fmt.Sprintf("10.96.0.%d", i+1)
		record(r, vip, state(vip, 80, fmt.Sprintf("10.244.0.%d:8080", i+1), fmt.Sprintf("10.244.1.%d:8080", i+1)))
		keys = append(keys, ipvs.Key{Address: netip.MustParseAddr(vip), Protocol: ipvs.TCP, Port: 80})
	}
	mustSync(t, r)
	refresh := func() { mustCheck(t, r) }
	// Nothing is believed before the first read, so it dumps everything.
	refresh()
	if len(d.Named("list-rs")) != len(keys) {
		t.Fatalf("first read dumped %d of %d virtual servers", len(d.Named("list-rs")), len(keys))
	}
	d.Reset()
	k.Ops()

	// With 6 virtual servers and 2 dumps per check, three checks dump each
	// once.
	for range 3 {
		refresh()
	}
	for _, key := range keys {
		if d.of(key) != 1 {
			t.Errorf("%v dumped %d times in three checks, want 1", key, d.of(key))
		}
	}
	// A lost real server is found by its share's check, confirmed, and
	// repaired; that check makes the next one whole.
	lost := netip.MustParseAddrPort("10.244.0.1:8080")
	_ = k.IPVS.DeleteRealServer(keys[0], lost)
	k.Ops()
	for range 3 {
		refresh()
	}
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.1:80/TCP 10.244.0.1:8080")

	// A draining real server's virtual server is dumped by every check,
	// so it goes as soon as its connections end; a stray virtual server
	// is confirmed with its real servers and deleted at the next check
	// that lists the virtual servers (this one: the fourth, see dumpPlan).
	k.IPVS.SetConnections(keys[1], netip.MustParseAddrPort("10.244.1.2:8080"), 1, 0)
	record(r, "10.96.0.2", state("10.96.0.2", 80, "10.244.0.2:8080"))
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "update-rs 10.96.0.2:80/TCP 10.244.1.2:8080 weight=0")
	stray := ipvs.Key{Address: netip.MustParseAddr("10.96.0.99"), Protocol: ipvs.TCP, Port: 80}
	_ = k.IPVS.AddVirtualServer(ipvs.VirtualServer{Key: stray, Scheduler: "rr"})
	_ = k.IPVS.AddRealServer(stray, ipvs.RealServer{Address: netip.MustParseAddr("10.244.9.9"), Port: 80, Weight: 1})
	k.Ops()
	d.Reset()
	refresh()
	refresh()
	if d.of(keys[1]) != 2 {
		t.Errorf("draining virtual server dumped %d times in two checks, want 2", d.of(keys[1]))
	}
	fakekernel.ExpectOps(t, k, "delete-vs 10.96.0.99:80/TCP")
	k.IPVS.SetConnections(keys[1], netip.MustParseAddrPort("10.244.1.2:8080"), 0, 0)
	refresh()
	fakekernel.ExpectOps(t, k, "delete-rs 10.96.0.2:80/TCP 10.244.1.2:8080")
}

// A share's check that finds its virtual servers gone makes the next check
// read everything: a flushed table is whole again after two checks, not one
// per share.
func TestReconcilerReadsWholeAfterAShareFoundDrift(t *testing.T) {
	k := fakekernel.New(t)
	// 40 virtual servers in shares of about 10.
	r := testReconciler(k, tuneReads(10, 0))
	var keys []ipvs.Key
	for i := range 40 {
		vip := fmt.Sprintf("10.96.0.%d", i+1)
		record(r, vip, state(vip, 80, fmt.Sprintf("10.244.0.%d:8080", i+1)))
		keys = append(keys, ipvs.Key{Address: netip.MustParseAddr(vip), Protocol: ipvs.TCP, Port: 80})
	}
	mustSync(t, r)
	mustCheck(t, r) // the first read, whole
	if st := mustCheck(t, r).Stats(); !st.Listed {
		t.Fatalf("the first share's check did not list the table: %+v", st)
	}
	k.Ops()
	for _, key := range keys {
		_ = k.IPVS.DeleteVirtualServer(key) // ipvsadm -C
	}
	k.Ops()
	// A share is empty once in 10^5 runs, and finds nothing: the next is not.
	st := mustCheck(t, r).Stats()
	for i := 0; st.RealServersOf == 0 && i < 3; i++ {
		st = mustCheck(t, r).Stats()
	}
	if st.Listed || st.RealServersOf == 0 || st.RealServersOf >= len(keys) {
		t.Fatalf("the share's check after the flush read none or all (%+v): the test's premise", st)
	}
	if st := mustCheck(t, r).Stats(); !st.Listed {
		t.Errorf("the check after a share found drift did not list the table: %+v", st)
	}
	if n := strings.Count(k.IPVS.Dump(), "-A "); n != len(keys) {
		t.Errorf("two checks after a flush left %d of %d virtual servers:\n%s", n, len(keys), k.IPVS.Dump())
	}
	if st := mustCheck(t, r).Stats(); st.Listed {
		t.Errorf("the check after the whole one listed the table again: shares resume")
	}
}

// One virtual server drifted in a share (another program keeps changing
// it) does not make the next check whole: only drift of a tenth of a share.
func TestReconcilerOneDriftDoesNotMakeTheNextCheckWhole(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k, tuneReads(50, 0))
	dumpsOnly(k)
	var keys []ipvs.Key
	for i := range 100 {
		vip := fmt.Sprintf("10.96.%d.%d", i/200, i%200+1)
		record(r, vip, state(vip, 80, fmt.Sprintf("10.244.0.%d:8080", i%200+1)))
		keys = append(keys, ipvs.Key{Address: netip.MustParseAddr(vip), Protocol: ipvs.TCP, Port: 80})
	}
	mustSync(t, r)
	mustCheck(t, r) // whole
	for range 4 {   // every share, each drifting one virtual server
		for _, key := range keys {
			_ = k.IPVS.DeleteRealServer(key, netip.MustParseAddrPort(fmt.Sprintf("10.244.0.%d:8080", key.Address.As4()[3])))
			break
		}
		st := mustCheck(t, r).Stats()
		if st.Listed && st.RealServersOf == len(keys) {
			t.Fatalf("a check after one drifted virtual server read them all: %+v", st)
		}
	}
}

// sixCountedServices returns a reconciler that has programmed six Services,
// checks them in shares of two, and counts its set listings in c.
func sixCountedServices(t *testing.T) (fakekernel.Kernel, *Reconciler, *oplog.Counter) {
	t.Helper()
	k := fakekernel.New(t)
	r := testReconciler(k, tuneReads(2, 0))
	c := &oplog.Counter{}
	k.Sets.SetHook(c.Hook)
	for i := range 6 {
		vip := fmt.Sprintf("10.96.0.%d", i+1)
		record(r, vip, state(vip, 80, fmt.Sprintf("10.244.0.%d:8080", i+1)))
	}
	mustSync(t, r)
	return k, r, c
}

// In the checks that do not list the virtual servers, a set whose entry
// count is what the belief expects is not listed; one whose count differs
// is, and repaired at once; drift that keeps the count waits for the next
// listing check.
func TestReconcilerListsSetsWhoseCountsDiffer(t *testing.T) {
	k, r, c := sixCountedServices(t)
	refresh := func() { mustCheck(t, r) }
	refresh()
	k.Ops()
	c.Reset()
	for range 3 {
		refresh()
	}
	if c.Exactly("list-entries "+desired.SetClusterIP) != 1 || c.Exactly("list-entries "+desired.SetIPVSIPs) != 1 {
		t.Errorf("three converged checks listed the sets %v times, want once each", c.Named("list-entries"))
	}
	fakekernel.ExpectOps(t, k)

	// A flushed set: its count differs, so the next check lists and refills
	// it, though it is not a listing check (the fourth was; this is the fifth).
	refresh()
	k.Ops()
	for i := range 6 {
		_ = k.Sets.DeleteEntry(desired.SetIPVSIPs, ipset.Entry{IP: netip.MustParseAddr(fmt.Sprintf("10.96.0.%d", i+1))})
	}
	k.Ops()
	refresh()
	var want []string
	for i := range 6 {
		want = append(want, fmt.Sprintf("add-entry %s 10.96.0.%d", desired.SetIPVSIPs, i+1))
	}
	fakekernel.ExpectOps(t, k, want...)

	// An entry swapped for another keeps the count: repaired by the next
	// check that lists (within three).
	_ = k.Sets.DeleteEntry(desired.SetIPVSIPs, ipset.Entry{IP: netip.MustParseAddr("10.96.0.1")})
	_ = k.Sets.AddEntry(desired.SetIPVSIPs, ipset.Entry{IP: netip.MustParseAddr("10.96.0.99")})
	k.Ops()
	for range 3 {
		refresh()
	}
	fakekernel.ExpectOps(t, k, "add-entry KUBE-IPVS-IPS 10.96.0.1", "delete-entry KUBE-IPVS-IPS 10.96.0.99")
}

// A sync that adds a Service while a check reads (between planShare and the
// count) changes the sets' counts in the kernel and in the belief alike: the
// check still lists no set.
func TestReconcilerCountsSetsBesideSyncWrites(t *testing.T) {
	k, r, c := sixCountedServices(t)
	mustCheck(t, r)
	// Checks until one lists the virtual servers: the next reads a share.
	for !mustCheck(t, r).Stats().Listed {
	}
	c.Reset()

	// The check's setup runs once it has planned its share, before it reads.
	read := r.CheckNow(func() error {
		record(r, "10.96.0.7", state("10.96.0.7", 80, "10.244.0.7:8080"))
		mustSync(t, r)
		return nil
	})
	if read.Err != nil {
		t.Fatal(read.Err)
	}
	if read.Stats().Listed {
		t.Fatal("the check listed the virtual servers; want one that reads a share")
	}
	if l := c.Named("list-entries"); len(l) != 0 {
		t.Errorf("the check listed sets %v; a sync's own writes made their counts differ", l)
	}
	k.Ops()
	mustSyncRead(t, r, &read)
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k)
}

// A sync's write that arrives while a drift check is dumping real servers
// goes to the kernel right after the dump in flight, before the next one.
func TestReconcilerWritesBeforeTheNextDump(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	for i := 1; i <= 6; i++ {
		record(r, fmt.Sprint(i), numbered(i, 2))
	}
	mustSync(t, r)
	// The kernel's log of dumps and writes, in the order it sees them;
	// the first dump is held until release is closed.
	var mu sync.Mutex
	var seen []string
	inDump, release := make(chan struct{}), make(chan struct{})
	held := false
	k.IPVS.SetHook(func(op string) error {
		word, _, _ := strings.Cut(op, " ")
		kind := "write"
		switch {
		case word == "read-table":
			return errors.New("no table read: dumps only")
		case word == "list-rs":
			kind = "dump"
		case strings.HasPrefix(word, "list-") || strings.HasPrefix(word, "get-"):
			return nil
		}
		mu.Lock()
		seen = append(seen, kind)
		hold := kind == "dump" && !held
		held = held || hold
		mu.Unlock()
		if hold {
			close(inDump)
			<-release
		}
		return nil
	})

	done := make(chan struct{})
	r.StartCheck(nil, func() { close(done) })
	<-inDump
	record(r, "7", numbered(7, 2))
	synced := make(chan struct{})
	go func() {
		r.Sync(nil, nil)
		close(synced)
	}()
	// White-box: wait until the sync's write is queued behind the dump in
	// flight: from then on a new shared hold of writesFirst is refused. A
	// sync that finishes first did not wait.
	for r.writesFirst.TryRLock() {
		r.writesFirst.RUnlock()
		select {
		case <-synced:
			t.Fatalf("the sync wrote beside the dump in flight instead of queueing (failed: %v)", r.Failed())
		default:
			runtime.Gosched()
		}
	}
	close(release)
	<-synced
	<-done
	if read := r.CheckDone(true); read.Err != nil {
		t.Fatal(read.Err)
	}
	if failed := r.Failed(); len(failed) > 0 {
		t.Fatal(failed)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 3 || seen[0] != "dump" || seen[1] != "write" {
		t.Errorf("kernel saw %v; want the write right after the first dump", seen)
	}
}

// Under the race detector: drift checks of a large table (planShare, the
// share's read and adopt on their own goroutine, sharing a mutex with syncs)
// while syncs add, change and delete Services leave the belief right.
func TestReconcilerShareReadsBesideSyncs(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k, tuneReads(8, 2))
	final := map[int]desired.State{}
	for i := 1; i <= 40; i++ {
		final[i] = numbered(i, 2)
		record(r, fmt.Sprint(i), final[i])
	}
	mustSync(t, r)
	mustCheck(t, r) // the first read lists everything

	for round := range 10 {
		done := make(chan struct{})
		r.StartCheck(nil, func() { close(done) })
		for i := 1 + round%3; i <= 40; i += 3 {
			switch {
			case i%5 == 0:
				final[i] = desired.State{}
			case i%2 == 0:
				final[i] = numbered(i, 1+round%3)
			default:
				final[i] = numbered(i, 2)
			}
			record(r, fmt.Sprint(i), final[i])
			mustSync(t, r)
		}
		<-done
		res := r.CheckDone(true)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		mustSyncRead(t, r, res)
	}
	// At most 40 virtual servers, 8 a check: at most 5 checks read them all.
	const shares = (40 + 8 - 1) / 8
	for range shares { // drains what the last changes left at weight 0
		mustCheck(t, r)
	}
	k.Ops()
	for range shares {
		mustCheck(t, r)
	}
	fakekernel.ExpectOps(t, k)

	expectKernelOf(t, k, final)
}

// The three kinds of kernel object are written side by side: a sync does not
// wait for kube-ipvs0's addresses before it writes virtual servers (3.5 s of
// addresses at a 10k cold start in the test VM). The address writes here
// wait until IPVS has been written, which one after the other never is.
func TestApplyWritesTheKindsSideBySide(t *testing.T) {
	k := fakekernel.New(t)
	// Addresses are added only once IPVS has been written to, or after
	// a timeout, which waited records.
	written := make(chan struct{})
	var once sync.Once
	k.IPVS.SetHook(func(op string) error {
		if strings.HasPrefix(op, "add-") {
			once.Do(func() { close(written) })
		}
		return nil
	})
	var waited atomic.Bool
	k.Links.SetHook(func(op string) error {
		if strings.HasPrefix(op, "add-addr") {
			select {
			case <-written:
			case <-time.After(5 * time.Second):
				waited.Store(true)
			}
		}
		return nil
	})
	r := testReconciler(k)
	record(r, "a", state("10.96.0.1", 80, "10.244.0.1:8080"))
	record(r, "b", state("10.96.0.2", 80, "10.244.0.2:8080"))
	mustSync(t, r)
	if waited.Load() {
		t.Error("addresses were written before any virtual server, not beside them")
	}
	if ops := r.Outcome().Ops; ops != 10 {
		t.Errorf("counted %d kernel writes, want 10 (2 addresses, 2 virtual servers, 2 real servers, 4 entries)", ops)
	}
	fakekernel.ExpectOps(t, k,
		"add-addr 10.96.0.1", "add-addr 10.96.0.2",
		"add-vs 10.96.0.1:80/TCP", "add-vs 10.96.0.2:80/TCP",
		"add-rs 10.96.0.1:80/TCP 10.244.0.1:8080", "add-rs 10.96.0.2:80/TCP 10.244.0.2:8080",
		"add-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:80", "add-entry KUBE-CLUSTER-IP 10.96.0.2,tcp:80",
		"add-entry KUBE-IPVS-IPS 10.96.0.1", "add-entry KUBE-IPVS-IPS 10.96.0.2")
}

// A restart reads the kernel ahead, beside the informers' list: the first
// check adopts that read instead of reading again; a critical Service
// written while the read is under way is left as written, without being
// read again to confirm; the rest is taken as it is (no write for what is
// as wanted) and what no Service wants goes. A read-ahead older than its
// bound is adopted too, marked stale for the caller to check again.
func TestReconcilerAdoptsTheReadAhead(t *testing.T) {
	k := fakekernel.New(t)
	before := testReconciler(k)
	for i := range 4 {
		vip := fmt.Sprintf("10.96.0.%d", i+1)
		record(before, vip, state(vip, 80, fmt.Sprintf("10.244.0.%d:8080", i+1)))
	}
	mustSync(t, before)
	mustCheck(t, before)
	k.Ops()

	r := testReconciler(k) // the restarted proxier
	var reads oplog.Counter
	k.IPVS.SetHook(reads.Hook)
	// The read ahead has read IPVS and waits at the addresses while the
	// critical Service is written.
	reading, release := make(chan struct{}), make(chan struct{})
	var held atomic.Bool
	k.Links.SetHook(func(op string) error {
		if op == "list-addrs" && held.CompareAndSwap(false, true) {
			close(reading)
			<-release
		}
		return nil
	})
	r.ReadAhead(time.Minute)
	<-reading
	record(r, "10.96.0.1", state("10.96.0.1", 80, "10.244.0.1:8080", "10.244.0.9:8080")) // critical, changed
	if _, errs, err := r.ProgramFirst([]types.NamespacedName{testobj.Name("10.96.0.1")}); err != nil || len(errs) > 0 {
		t.Fatal(err, errs)
	}
	critical := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	readFirst := reads.Exactly("get-vs " + critical.String())
	close(release)
	for i := 1; i < 3; i++ { // 10.96.0.4 is no longer wanted
		vip := fmt.Sprintf("10.96.0.%d", i+1)
		record(r, vip, state(vip, 80, fmt.Sprintf("10.244.0.%d:8080", i+1)))
	}
	read := r.CheckNow(nil)
	if read.Err != nil || !read.Adopted() {
		t.Fatalf("the read ahead was not adopted: %v", read.Err)
	}
	if n := reads.Of("list-vs"); n != 1 {
		t.Errorf("the virtual servers were listed %d times, want once (the read ahead)", n)
	}
	if n := reads.Exactly("get-vs " + critical.String()); n != readFirst {
		t.Errorf("the critical Service, written during the read, was read again %d times to adopt it", n-readFirst)
	}
	mustSyncRead(t, r, &read)
	fakekernel.ExpectOps(t, k,
		"add-rs 10.96.0.1:80/TCP 10.244.0.9:8080",
		"delete-vs 10.96.0.4:80/TCP",
		"delete-addr 10.96.0.4",
		"delete-entry KUBE-CLUSTER-IP 10.96.0.4,tcp:80",
		"delete-entry KUBE-IPVS-IPS 10.96.0.4")

	if read.Stale {
		t.Error("a read-ahead within its bound marked stale")
	}

	stale := testReconciler(k)
	reads.Reset()
	stale.ReadAhead(0)
	time.Sleep(time.Millisecond)
	if read := stale.CheckNow(nil); !read.Adopted() || !read.Stale || reads.Of("list-vs") != 1 {
		t.Errorf("a stale read-ahead: adopted %v, marked stale %v, after %d listings, want it adopted and marked after one", read.Adopted(), read.Stale, reads.Of("list-vs"))
	}
}
