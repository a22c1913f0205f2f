package reconciler

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// testReconciler is a reconciler of k's objects, managing its IPv4 sets,
// with 10.0.0.0/24 excluded, its options tuned by each of tune.
func testReconciler(k fakekernel.Kernel, tune ...func(*Options)) *Reconciler {
	return New(Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets}, testOptions(tune...))
}

func testOptions(tune ...func(*Options)) Options {
	o := Options{SetNames: setNames(desired.IPv4Sets), Excluded: func(a netip.Addr) bool {
		return netip.MustParsePrefix("10.0.0.0/24").Contains(a)
	}}
	for _, f := range tune {
		f(&o)
	}
	return o
}

// clocked sets the reconciler's clock to c.
func clocked(c *fakekernel.Clock) func(*Options) { return func(o *Options) { o.Now = c.Now } }

// tuneReads sets how a drift check reads a large kernel.
func tuneReads(dumpsMax, adoptSlice int) func(*Options) {
	return func(o *Options) { o.DumpsMax, o.AdoptSlice = dumpsMax, adoptSlice }
}

func state(vip string, port uint16, reals ...string) desired.State {
	a := netip.MustParseAddr(vip)
	v := desired.VirtualServer{Virtual: ipvs.VirtualServer{Key: ipvs.Key{Address: a, Protocol: ipvs.TCP, Port: port}, Scheduler: "rr"}}
	for _, r := range reals {
		ap := netip.MustParseAddrPort(r)
		v.Reals = append(v.Reals, ipvs.RealServer{Address: ap.Addr(), Port: ap.Port(), Weight: 1})
	}
	return desired.State{
		VirtualServers: []desired.VirtualServer{v},
		Addresses:      []netip.Addr{a},
		Entries: []desired.SetEntry{
			{Set: desired.SetClusterIP, Entry: ipset.Entry{IP: a, Protocol: ipset.EntryTCP, Port: port}},
			{Set: desired.SetIPVSIPs, Entry: ipset.Entry{IP: a}},
		},
	}
}

// setNames are the names of sets.
func setNames(sets []ipset.Set) []string {
	out := make([]string, len(sets))
	for i, s := range sets {
		out[i] = s.Name
	}
	return out
}

// record records that Service name wants st; an empty st is a deleted
// Service.
func record(r *Reconciler, name string, st desired.State) {
	r.Record([]Change{{Name: testobj.Name(name), State: st}})
}

// mustSync writes every dirty object, as a sync without a drift check does,
// and fails t if an object is left failed.
func mustSync(t *testing.T, r *Reconciler) {
	t.Helper()
	mustSyncRead(t, r, nil)
}

// mustSyncRead is mustSync given a drift check that ended (nil: none).
func mustSyncRead(t *testing.T, r *Reconciler, read *CheckResult) {
	t.Helper()
	r.Sync(nil, read)
	if failed := r.Failed(); len(failed) > 0 {
		t.Fatalf("failed objects: %v", failed)
	}
}

// mustCheck runs a drift check on the test's goroutine and the sync that
// takes it, as the proxier's first sync does, and returns the check.
func mustCheck(t *testing.T, r *Reconciler) *CheckResult {
	t.Helper()
	read := r.CheckNow(nil)
	if read.Err != nil {
		t.Fatal(read.Err)
	}
	mustSyncRead(t, r, &read)
	return &read
}

// numbered is Service i's state: VIP 10.96.0.i:80 and reals real servers.
func numbered(i, reals int) desired.State {
	var rs []string
	for j := 0; j < reals; j++ {
		rs = append(rs, fmt.Sprintf("10.244.%d.%d:8080", i, j))
	}
	return state(fmt.Sprintf("10.96.0.%d", i), 80, rs...)
}

// expectKernelOf checks that k holds what a reconciler that only ever
// applied final writes to a fresh kernel.
func expectKernelOf(t *testing.T, k fakekernel.Kernel, final map[int]desired.State) {
	t.Helper()
	fresh := fakekernel.New(t)
	direct := testReconciler(fresh)
	for i, st := range final {
		record(direct, fmt.Sprint(i), st)
	}
	mustSync(t, direct)
	if got, want := k.IPVS.Dump(), fresh.IPVS.Dump(); got != want {
		t.Errorf("kernel holds\n%s\nwant\n%s", got, want)
	}
	if got, want := k.Sets.Dump(), fresh.Sets.Dump(); got != want {
		t.Errorf("ipsets hold\n%s\nwant\n%s", got, want)
	}
}

// duringRead makes the next drift check that lists the last set run during
// just before: the rest of the kernel has been read, as a sync writes
// while a check's read is in flight. t fails if during never runs.
func duringRead(t *testing.T, k fakekernel.Kernel, during func()) {
	last := "list-entries " + desired.IPv4Sets[len(desired.IPv4Sets)-1].Name
	var once sync.Once
	ran := false
	k.Sets.SetHook(func(op string) error {
		if op == last {
			once.Do(func() { during(); ran = true })
		}
		return nil
	})
	t.Cleanup(func() {
		if !ran {
			t.Error("no drift check read the sets")
		}
	})
}

// serviceA returns a reconciler that has programmed Service a
// (10.96.0.1:80 → reals), with the kernel's op record cleared.
func serviceA(t *testing.T, reals ...string) (fakekernel.Kernel, *Reconciler) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	record(r, "a", state("10.96.0.1", 80, reals...))
	mustSync(t, r)
	k.Ops()
	return k, r
}

// twoServices returns a reconciler that has programmed Services a
// (10.96.0.1:80 → 10.244.0.1:8080) and b (10.96.0.2:80 → 10.244.0.2:8080).
func twoServices(t *testing.T) (fakekernel.Kernel, *Reconciler) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	record(r, "a", state("10.96.0.1", 80, "10.244.0.1:8080"))
	record(r, "b", state("10.96.0.2", 80, "10.244.0.2:8080"))
	mustSync(t, r)
	return k, r
}

// dumpCounter counts the real-server dumps of each virtual server.
type dumpCounter struct{ oplog.Counter }

// dumpsOnly hides k's table read, as for a large table, and counts the
// real-server dumps.
func dumpsOnly(k fakekernel.Kernel) *dumpCounter {
	d := &dumpCounter{}
	k.IPVS.SetHook(func(op string) error {
		_ = d.Hook(op)
		if op == "read-table" {
			return errors.New("no table read: dumps only")
		}
		return nil
	})
	return d
}

// of is how often k's real servers were dumped.
func (d *dumpCounter) of(k ipvs.Key) int { return d.Exactly("list-rs " + k.String()) }
