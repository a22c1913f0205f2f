package reconciler

// Tests of the drift check's reads: whole tables, shares of large ones, set
// counts, and their interplay with syncs' writes.

import (
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
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
	k.Ops()
	mustRefresh(t, r)
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.1:80/TCP 10.244.0.1:8080")
	if k.IPVS.TableReads != 1 {
		t.Fatalf("%d table reads, want 1", k.IPVS.TableReads)
	}

	// A large table is dumped per virtual server: its read is quadratic.
	for i := range tableReadMax {
		vs := ipvs.VirtualServer{Key: ipvs.Key{Address: netip.AddrFrom4([4]byte{10, 97, byte(i >> 8), byte(i)}), Protocol: ipvs.TCP, Port: 80}, Scheduler: "rr"}
		if err := k.IPVS.AddVirtualServer(vs); err != nil {
			t.Fatal(err)
		}
	}
	if err := refresh(r); err != nil {
		t.Fatal(err)
	}
	if k.IPVS.TableReads != 1 {
		t.Fatalf("%d table reads of %d virtual servers, want none", k.IPVS.TableReads-1, tableReadMax+2)
	}
}

// dumpsOnly hides the fake's table read, as for a large table, and counts
// the virtual servers whose real servers were dumped.
type dumpsOnly struct {
	ipvs.Interface
	dumped map[ipvs.Key]int
}

// countedReads counts the requests that list virtual servers and that get one.
type countedReads struct {
	ipvs.Interface
	lists, gets int
}

func (c *countedReads) VirtualServers() ([]ipvs.VirtualServer, error) {
	c.lists++
	return c.Interface.VirtualServers()
}

func (c *countedReads) GetVirtualServer(k ipvs.Key) (ipvs.VirtualServer, bool, error) {
	c.gets++
	return c.Interface.GetVirtualServer(k)
}

// Above dumpsMax, only one check in shares lists the virtual servers; the
// others read their share by its real servers. Drift of every kind is still
// repaired within shares checks, and a converged table costs no writes.
func TestReconcilerListsLargeTablesEveryFewChecks(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	c := &countedReads{Interface: k.IPVS}
	r.ipvs, r.dumpsMax = c, 2
	var keys []ipvs.Key
	for i := range 6 {
		vip := fmt.Sprintf("10.96.0.%d", i+1)
		st := state(vip, 80, fmt.Sprintf("10.244.0.%d:8080", i+1))
		if i == 5 {
			st = state(vip, 80) // no endpoints: its real-server dump is empty
		}
		r.setService(testobj.Name(vip), st)
		keys = append(keys, ipvs.Key{Address: netip.MustParseAddr(vip), Protocol: ipvs.TCP, Port: 80})
	}
	mustApply(t, r)
	refresh := func() { mustRefresh(t, r) }
	refresh() // the first read lists everything
	k.Ops()
	c.lists = 0
	for range 3 {
		refresh()
	}
	if c.lists != 1 {
		t.Errorf("three checks of a table in three shares listed it %d times, want 1", c.lists)
	}
	if c.gets > 1 {
		t.Errorf("converged checks got %d virtual servers one by one; only the one without real servers needs it", c.gets)
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

func (d dumpsOnly) RealServers(k ipvs.Key) ([]ipvs.RealServer, error) {
	d.dumped[k]++
	return d.Interface.RealServers(k)
}

func TestReconcilerDumpsAShareOfLargeTables(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	d := dumpsOnly{Interface: k.IPVS, dumped: map[ipvs.Key]int{}}
	r.ipvs, r.dumpsMax = d, 2
	var keys []ipvs.Key
	for i := range 6 {
		vip := fmt.Sprintf("10.96.0.%d", i+1)
		r.setService(testobj.Name(vip), state(vip, 80, fmt.Sprintf("10.244.0.%d:8080", i+1), fmt.Sprintf("10.244.1.%d:8080", i+1)))
		keys = append(keys, ipvs.Key{Address: netip.MustParseAddr(vip), Protocol: ipvs.TCP, Port: 80})
	}
	mustApply(t, r)
	refresh := func() { mustRefresh(t, r) }
	// Nothing is believed before the first read, so it dumps everything.
	refresh()
	if len(d.dumped) != len(keys) {
		t.Fatalf("first read dumped %d of %d virtual servers", len(d.dumped), len(keys))
	}
	clear(d.dumped)
	k.Ops()

	// With 6 virtual servers and 2 dumps per check, three checks dump each
	// once (the drifted one again, to confirm) and repair the drift.
	lost := netip.MustParseAddrPort("10.244.0.1:8080")
	_ = k.IPVS.DeleteRealServer(keys[0], lost)
	k.Ops()
	for range 3 {
		refresh()
	}
	for i, key := range keys {
		want := 1
		if i == 0 {
			want = 2
		}
		if d.dumped[key] != want {
			t.Errorf("%v dumped %d times in three checks, want %d", key, d.dumped[key], want)
		}
	}
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.1:80/TCP 10.244.0.1:8080")

	// A draining real server's virtual server is dumped by every check,
	// so it goes as soon as its connections end; a stray virtual server
	// is confirmed with its real servers and deleted at the next check
	// that lists the virtual servers (this one: the fourth, see dumpPlan).
	k.IPVS.SetConnections(keys[1], netip.MustParseAddrPort("10.244.1.2:8080"), 1, 0)
	r.setService(testobj.Name("10.96.0.2"), state("10.96.0.2", 80, "10.244.0.2:8080"))
	mustApply(t, r)
	fakekernel.ExpectOps(t, k, "update-rs 10.96.0.2:80/TCP 10.244.1.2:8080 weight=0")
	stray := ipvs.Key{Address: netip.MustParseAddr("10.96.0.99"), Protocol: ipvs.TCP, Port: 80}
	_ = k.IPVS.AddVirtualServer(ipvs.VirtualServer{Key: stray, Scheduler: "rr"})
	_ = k.IPVS.AddRealServer(stray, ipvs.RealServer{Address: netip.MustParseAddr("10.244.9.9"), Port: 80, Weight: 1})
	k.Ops()
	clear(d.dumped)
	refresh()
	refresh()
	if d.dumped[keys[1]] != 2 {
		t.Errorf("draining virtual server dumped %d times in two checks, want 2", d.dumped[keys[1]])
	}
	fakekernel.ExpectOps(t, k, "delete-vs 10.96.0.99:80/TCP")
	k.IPVS.SetConnections(keys[1], netip.MustParseAddrPort("10.244.1.2:8080"), 0, 0)
	refresh()
	fakekernel.ExpectOps(t, k, "delete-rs 10.96.0.2:80/TCP 10.244.1.2:8080")
}

// countedLists counts the listings of each set.
type countedLists struct {
	ipset.Interface
	lists map[string]int
}

func (c countedLists) Entries(set string) ([]ipset.Entry, error) {
	c.lists[set]++
	return c.Interface.Entries(set)
}

// sixCountedServices returns a reconciler that has programmed six Services,
// checks them in shares of two, and counts its set listings in c.
func sixCountedServices(t *testing.T) (fakekernel.Kernel, *Reconciler, countedLists) {
	t.Helper()
	k := fakekernel.New(t)
	r := testReconciler(k)
	c := countedLists{Interface: k.Sets, lists: map[string]int{}}
	r.sets, r.dumpsMax = c, 2
	for i := range 6 {
		vip := fmt.Sprintf("10.96.0.%d", i+1)
		r.setService(testobj.Name(vip), state(vip, 80, fmt.Sprintf("10.244.0.%d:8080", i+1)))
	}
	mustApply(t, r)
	return k, r, c
}

// In the checks that do not list the virtual servers, a set whose entry
// count is what the belief expects is not listed; one whose count differs
// is, and repaired at once; drift that keeps the count waits for the next
// listing check.
func TestReconcilerListsSetsWhoseCountsDiffer(t *testing.T) {
	k, r, c := sixCountedServices(t)
	refresh := func() { mustRefresh(t, r) }
	refresh()
	k.Ops()
	clear(c.lists)
	for range 3 {
		refresh()
	}
	if c.lists[desired.SetClusterIP] != 1 || c.lists[desired.SetIPVSIPs] != 1 {
		t.Errorf("three converged checks listed the sets %v times, want once each", c.lists)
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
	mustRefresh(t, r)
	shares := (len(r.vs.have) + r.dumpsMax - 1) / r.dumpsMax
	for r.rounds%shares == 0 { // the next check is not a listing one
		mustRefresh(t, r)
	}
	clear(c.lists)

	r.beginRead()
	r.mu.Lock()
	r.planShare()
	r.mu.Unlock()
	r.setService(testobj.Name("10.96.0.7"), state("10.96.0.7", 80, "10.244.0.7:8080"))
	mustApply(t, r)
	v, err := r.readKernel()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.lists) != 0 {
		t.Errorf("the check listed sets %v; a sync's own writes made their counts differ", c.lists)
	}
	w := mustAdopt(t, r, v)
	if errs := r.drain(v, w); len(errs) > 0 {
		t.Fatal(errs)
	}
	k.Ops()
	mustApply(t, r)
	mustRefresh(t, r)
	fakekernel.ExpectOps(t, k)
}

// orderedIPVS logs dumps and writes in the order the kernel would see them,
// holding the first dump until release is closed.
type orderedIPVS struct {
	ipvs.Interface
	mu       sync.Mutex
	log      []string
	inDump   chan struct{} // closed when the first dump starts
	release  chan struct{}
	blocking bool
}

func (o *orderedIPVS) RealServers(k ipvs.Key) ([]ipvs.RealServer, error) {
	o.mu.Lock()
	first := !o.blocking
	o.blocking = true
	o.log = append(o.log, "dump")
	o.mu.Unlock()
	if first {
		close(o.inDump)
		<-o.release
	}
	return o.Interface.RealServers(k)
}

func (o *orderedIPVS) Write(ops []ipvs.Op) []error {
	o.mu.Lock()
	o.log = append(o.log, "write")
	o.mu.Unlock()
	return o.Interface.Write(ops)
}

// A sync's write that arrives while a drift check is dumping real servers
// goes to the kernel right after the dump in flight, before the next one.
func TestReconcilerWritesBeforeTheNextDump(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	for i := 1; i <= 6; i++ {
		r.setService(testobj.Name(fmt.Sprint(i)), numbered(i, 2))
	}
	mustApply(t, r)
	o := &orderedIPVS{Interface: k.IPVS, inDump: make(chan struct{}), release: make(chan struct{})}
	r.ipvs = o

	r.beginRead()
	r.mu.Lock()
	r.planShare()
	r.mu.Unlock()
	read := make(chan error)
	go func() {
		_, err := r.readKernel()
		read <- err
	}()
	<-o.inDump
	r.setService(testobj.Name("7"), numbered(7, 2))
	applied := make(chan []error)
	go func() { applied <- r.apply() }()
	// Wait until apply is queued behind the dump in flight: from then on a
	// new shared hold is refused. An apply that finishes first did not wait.
	for r.writesFirst.TryRLock() {
		r.writesFirst.RUnlock()
		select {
		case errs := <-applied:
			t.Fatalf("apply wrote beside the dump in flight instead of queueing (errors: %v)", errs)
		default:
			runtime.Gosched()
		}
	}
	close(o.release)
	if errs := <-applied; len(errs) > 0 {
		t.Fatal(errs)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.log) < 3 || o.log[0] != "dump" || o.log[1] != "write" {
		t.Errorf("kernel saw %v; want the write right after the first dump", o.log)
	}
}

// Under the race detector: drift checks of a large table (planShare, the
// share's read and adopt on their own goroutine, sharing a mutex with syncs)
// while syncs add, change and delete Services leave the belief right.
func TestReconcilerShareReadsBesideSyncs(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	r.adoptSlice, r.dumpsMax = 2, 8
	final := map[int]desired.State{}
	for i := 1; i <= 40; i++ {
		final[i] = numbered(i, 2)
		r.setService(testobj.Name(fmt.Sprint(i)), final[i])
	}
	mustApply(t, r)
	mustRefresh(t, r) // the first read lists everything

	for round := range 10 {
		done := make(chan struct{})
		r.StartCheck(nil, func() { close(done) })
		for i := 1 + round%3; i <= 40; i += 3 {
			r.mu.Lock()
			switch {
			case i%5 == 0:
				final[i] = desired.State{}
			case i%2 == 0:
				final[i] = numbered(i, 1+round%3)
			default:
				final[i] = numbered(i, 2)
			}
			r.setService(testobj.Name(fmt.Sprint(i)), final[i])
			mustApply(t, r)
			r.mu.Unlock()
		}
		<-done
		res := r.CheckDone(true)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if errs := r.drain(res.view, res.written); len(errs) > 0 {
			t.Fatal(errs)
		}
		mustApply(t, r)
	}
	shares := (len(r.vs.have) + r.dumpsMax - 1) / r.dumpsMax
	for range shares { // drains what the last changes left at weight 0
		mustRefresh(t, r)
	}
	k.Ops()
	for range shares {
		mustRefresh(t, r)
	}
	fakekernel.ExpectOps(t, k)

	expectKernelOf(t, k, final)
}

// ipvsSignal closes written at its first write.
type ipvsSignal struct {
	ipvs.Interface
	once    sync.Once
	written chan struct{}
}

func (s *ipvsSignal) Write(ops []ipvs.Op) []error {
	s.once.Do(func() { close(s.written) })
	return s.Interface.Write(ops)
}

// addressesAfter adds addresses only once IPVS has been written to, or
// after a timeout, and records which.
type addressesAfter struct {
	dummyiface.Interface
	ipvsWritten <-chan struct{}
	waited      bool
}

func (a *addressesAfter) AddAddresses(addrs []netip.Addr) []error {
	select {
	case <-a.ipvsWritten:
	case <-time.After(5 * time.Second):
		a.waited = true
	}
	return a.Interface.AddAddresses(addrs)
}

// The three kinds of kernel object are written side by side: a sync does not
// wait for kube-ipvs0's addresses before it writes virtual servers (3.5 s of
// addresses at a 10k cold start in the test VM). The address writes here
// wait until IPVS has been written, which one after the other never is.
func TestApplyWritesTheKindsSideBySide(t *testing.T) {
	k := fakekernel.New(t)
	v := &ipvsSignal{Interface: k.IPVS, written: make(chan struct{})}
	a := &addressesAfter{Interface: k.Links, ipvsWritten: v.written}
	r := New(Kernel{IPVS: v, Links: a, Sets: k.Sets}, Options{SetNames: setNames(desired.IPv4Sets)})
	r.setService(testobj.Name("a"), state("10.96.0.1", 80, "10.244.0.1:8080"))
	r.setService(testobj.Name("b"), state("10.96.0.2", 80, "10.244.0.2:8080"))
	mustApply(t, r)
	if a.waited {
		t.Error("addresses were written before any virtual server, not beside them")
	}
	if r.ops != 10 {
		t.Errorf("counted %d kernel writes, want 10 (2 addresses, 2 virtual servers, 2 real servers, 4 entries)", r.ops)
	}
	fakekernel.ExpectOps(t, k,
		"add-addr 10.96.0.1", "add-addr 10.96.0.2",
		"add-vs 10.96.0.1:80/TCP", "add-vs 10.96.0.2:80/TCP",
		"add-rs 10.96.0.1:80/TCP 10.244.0.1:8080", "add-rs 10.96.0.2:80/TCP 10.244.0.2:8080",
		"add-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:80", "add-entry KUBE-CLUSTER-IP 10.96.0.2,tcp:80",
		"add-entry KUBE-IPVS-IPS 10.96.0.1", "add-entry KUBE-IPVS-IPS 10.96.0.2")
}
