package proxier

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// fakeKernel is the reconciler tests' kernel: the fakes of ipvs, dummyiface
// and ipset. The helpers below program it and read what was written.
type fakeKernel struct {
	ipvs  *ipvs.Fake
	links *dummyiface.Fake
	sets  *ipset.Fake
}

func newFakeKernel(t *testing.T) fakeKernel {
	k := fakeKernel{ipvs.NewFake(), dummyiface.NewFake(), ipset.NewFake()}
	_ = k.links.EnsureLink()
	for _, s := range desired.IPv4Sets {
		if err := k.sets.EnsureSet(s); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

func (k fakeKernel) reconciler() *reconciler {
	names := make([]string, len(desired.IPv4Sets))
	for i, s := range desired.IPv4Sets {
		names[i] = s.Name
	}
	return newReconciler(k.ipvs, k.links, k.sets, names, func(a netip.Addr) bool {
		return netip.MustParsePrefix("10.0.0.0/24").Contains(a)
	}, 0)
}

// ops returns every kernel write since the last call, sorted.
func (k fakeKernel) ops() []string {
	all := append(append(k.ipvs.TakeOps(), k.links.TakeOps()...), k.sets.TakeOps()...)
	slices.Sort(all)
	return all
}

func name(n string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: n} }

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
			{Set: desired.SetClusterIP, Entry: ipset.Entry{IP: a, Protocol: "tcp", Port: port}},
			{Set: desired.SetIPVSIPs, Entry: ipset.Entry{IP: a}},
		},
	}
}

// testClock is a reconciler's clock, moved by hand.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time          { return c.t }
func (c *testClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func withClock(r *reconciler) *testClock {
	c := &testClock{time.Now()}
	r.now = c.now
	return c
}

func mustApply(t *testing.T, r *reconciler) {
	t.Helper()
	if errs := r.apply(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// mustRefresh runs a drift check inline and applies what it found.
func mustRefresh(t *testing.T, r *reconciler) {
	t.Helper()
	if err := refresh(r); err != nil {
		t.Fatal(err)
	}
	mustApply(t, r)
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
func expectKernelOf(t *testing.T, k fakeKernel, final map[int]desired.State) {
	t.Helper()
	fresh := newFakeKernel(t)
	direct := fresh.reconciler()
	for i, st := range final {
		direct.setService(name(fmt.Sprint(i)), st)
	}
	mustApply(t, direct)
	if got, want := k.ipvs.Dump(), fresh.ipvs.Dump(); got != want {
		t.Errorf("kernel holds\n%s\nwant\n%s", got, want)
	}
	if got, want := k.sets.Dump(), fresh.sets.Dump(); got != want {
		t.Errorf("ipsets hold\n%s\nwant\n%s", got, want)
	}
}

// refresh runs a whole drift check on the test's goroutine and drains.
func refresh(r *reconciler) error {
	read := r.checkNow(nil)
	if read.view == nil {
		return read.err
	}
	return errors.Join(append(r.drain(read.view, read.written), read.err)...)
}

// mustRead starts a drift check's read and reads the kernel.
func mustRead(t *testing.T, r *reconciler) *kernelView {
	t.Helper()
	r.beginRead()
	v, err := r.readKernel()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustAdopt(t *testing.T, r *reconciler, v *kernelView) map[ipvs.Key]bool {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	w, err := r.adopt(v)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func expectOps(t *testing.T, k fakeKernel, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := k.ops(); !slices.Equal(got, want) {
		t.Errorf("kernel ops:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// serviceA returns a reconciler that has programmed Service a
// (10.96.0.1:80 → reals), with the kernel's op record cleared.
func serviceA(t *testing.T, reals ...string) (fakeKernel, *reconciler) {
	k := newFakeKernel(t)
	r := k.reconciler()
	r.setService(name("a"), state("10.96.0.1", 80, reals...))
	mustApply(t, r)
	k.ops()
	return k, r
}

// twoServices returns a reconciler that has programmed Services a
// (10.96.0.1:80 → 10.244.0.1:8080) and b (10.96.0.2:80 → 10.244.0.2:8080).
func twoServices(t *testing.T) (fakeKernel, *reconciler) {
	k := newFakeKernel(t)
	r := k.reconciler()
	r.setService(name("a"), state("10.96.0.1", 80, "10.244.0.1:8080"))
	r.setService(name("b"), state("10.96.0.2", 80, "10.244.0.2:8080"))
	mustApply(t, r)
	return k, r
}
