package proxier

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

type recordedEvents []string

func (r *recordedEvents) Eventf(_, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	*r = append(*r, eventtype+" "+reason+" "+fmt.Sprintf(note, args...))
}

// newTestProxier is a proxier on a fake kernel, its config tuned by each
// of tune.
func newTestProxier(t *testing.T, tune ...func(*Config)) (*Proxier, fakekernel.Kernel, *iptables.Fake, *recordedEvents) {
	return newLoggingProxier(t, zap.NewNop(), healthz.New(time.Minute), tune...)
}

// newLoggingProxier is newTestProxier with a logger and health state of the
// test's own.
func newLoggingProxier(t *testing.T, log *zap.Logger, health *healthz.State, tune ...func(*Config)) (*Proxier, fakekernel.Kernel, *iptables.Fake, *recordedEvents) {
	k := fakekernel.Bare()
	ipt := &iptables.Fake{}
	ev := &recordedEvents{}
	cfg := Config{Desired: desired.Config{NodeName: "me"}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour}
	for _, f := range tune {
		f(&cfg)
	}
	p := New(cfg, Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: ipt}, log, health, metrics.New(), ev)
	return p, k, ipt, ev
}

func TestProxierSyncsOnlyAfterCachesAndOnlyWhatChanged(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t)
	web := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	web.Name = "web"
	p.OnServiceAdd(desired.ServiceOf(web))
	p.SyncNow()
	if k.IPVS.Dump() != "" || len(ipt.Payloads) != 0 {
		t.Fatal("synced before the caches were synced")
	}
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	if !strings.Contains(k.IPVS.Dump(), "-A 10.96.0.10:80/TCP -s rr") || len(ipt.Payloads) != 1 {
		t.Fatalf("first (full) sync did not program the service and the glue:\n%s", k.IPVS.Dump())
	}
	if len(k.Sets.SetNames()) != len(desired.IPv4Sets) {
		t.Fatalf("sets %v", k.Sets.SetNames())
	}
	k.Ops()

	s := testobj.Slice("web-1", []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, testobj.EP{IP: "10.244.0.1"})
	s.Labels[discovery.LabelServiceName] = "web"
	p.OnEndpointSliceAdd(desired.SliceOf(s))
	p.SyncNow()
	fakekernel.ExpectOps(t, k, "add-rs 10.96.0.10:80/TCP 10.244.0.1:8080")
	if len(ipt.Payloads) != 1 {
		t.Fatal("a partial sync rewrote iptables")
	}

	// An update that changes nothing the proxier uses is not even queued.
	same := s.DeepCopy()
	same.ResourceVersion = "2"
	p.OnEndpointSliceUpdate(desired.SliceOf(s), desired.SliceOf(same))
	if svcs, eps := p.pendingCounts(); svcs+eps != 0 {
		t.Fatalf("no-op update queued %d+%d changes", svcs, eps)
	}

	// A deleted Service whose real server carries no connection goes at
	// once; nothing is left for a drift check.
	p.OnServiceDelete(desired.ServiceOf(web))
	p.SyncNow()
	fakekernel.ExpectOps(t, k, "delete-addr 10.96.0.10", "delete-entry KUBE-CLUSTER-IP 10.96.0.10,tcp:80", "delete-entry KUBE-IPVS-IPS 10.96.0.10",
		"delete-vs 10.96.0.10:80/TCP")
	p.drift.needFull = true
	p.SyncNow()
	if k.IPVS.Dump() != "" || k.Links.Dump() != "" {
		t.Fatalf("deleted service left state:\n%s\n%s", k.IPVS.Dump(), k.Links.Dump())
	}
}

// The kernel setup needs nothing from the apiserver, so Run does it while
// the informers still list, off the cold start's critical path; the first
// sync then does not set up again.
func TestRunSetsTheKernelUpWhileTheCachesSync(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t)
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { p.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()

	setUp := func() bool {
		saved, _ := ipt.Save()
		return len(k.Sets.SetNames()) == len(desired.IPv4Sets) && strings.Contains(string(saved), "-A KUBE-POSTROUTING")
	}
	for deadline := time.Now().Add(10 * time.Second); !setUp(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("kernel not set up before the caches synced: sets %v", k.Sets.SetNames())
		}
	}

	web := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	web.Name = "web"
	p.OnServiceAdd(desired.ServiceOf(web))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(k.IPVS.Dump(), "-A 10.96.0.10:80/TCP"); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first sync never programmed the service")
		}
	}
	cancel()
	<-stopped
	if len(ipt.Payloads) != 1 {
		t.Errorf("iptables written %d times; the first sync should use the early setup", len(ipt.Payloads))
	}
}

// A restart whose informers list for longer than a sync period takes the
// kernel read made meanwhile, so that it is synced without reading again,
// and checks the kernel again at the next sync: another program may have
// written since.
func TestStaleReadAtStartIsCheckedAgainAtOnce(t *testing.T) {
	before, k, ipt, _ := newTestProxier(t)
	before.OnServicesSynced()
	before.OnEndpointSlicesSynced()
	before.SyncNow() // the kernel set up, as a restart finds it
	p := New(before.cfg, Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: ipt}, zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
	var reads oplog.Counter
	k.IPVS.SetHook(reads.Hook)
	p.startEarly(0) // Run's, with a list that outlasts the bound
	time.Sleep(time.Millisecond)
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	if n := reads.Of("list-vs"); n != 1 {
		t.Fatalf("the first sync listed the virtual servers %d times, want once (the read at start)", n)
	}
	p.SyncNow()
	if n := reads.Of("list-vs"); n != 2 {
		t.Errorf("the sync after a stale first read listed the virtual servers %d times in all, want another check (2)", n)
	}
}

func TestProxierReportsBadInputOnce(t *testing.T) {
	p, k, _, ev := newTestProxier(t)
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	bad := testobj.Service("10.96.0.10", testobj.Port("a", v1.ProtocolTCP, 80), testobj.Port("b", "ICMP", 81))
	p.OnServiceAdd(desired.ServiceOf(bad))
	p.SyncNow()
	p.drift.needFull = true // a drift check must not repeat it
	p.SyncNow()
	if len(*ev) != 1 || !strings.Contains((*ev)[0], "Warning InvalidService") || !strings.Contains((*ev)[0], `"ICMP"`) {
		t.Fatalf("events %q, want one warning naming the bad protocol", *ev)
	}
	if !strings.Contains(k.IPVS.Dump(), "-A 10.96.0.10:80/TCP") {
		t.Fatal("the good port must still be programmed")
	}
}

// failedObjects reads the failed-objects gauge of one kind.
func failedObjects(t *testing.T, p *Proxier, kind string) float64 {
	t.Helper()
	families, err := p.metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kube_ipvs_proxy_failed_objects" {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == kind {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no failed-objects gauge for kind %q", kind)
	return 0
}

func TestProxierKeepsDeletionsAcrossAFailedSetup(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t)
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	web := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	p.OnServiceAdd(desired.ServiceOf(web))
	p.SyncNow()
	if k.IPVS.Dump() == "" {
		t.Fatal("service not programmed")
	}

	// The Service is deleted while a drift check is due whose setup fails:
	// the deletion is applied all the same, the kernel is still read, and
	// the setup is retried alone.
	p.OnServiceDelete(desired.ServiceOf(web))
	p.drift.needFull = true
	ipt.SetHook(oplog.FailWith(fmt.Errorf("iptables: injected failure"), "save", "restore"))
	p.SyncNow()
	if k.IPVS.Dump() != "" || k.Links.Dump() != "" {
		t.Fatalf("deletion held back by a failing setup:\n%s\n%s", k.IPVS.Dump(), k.Links.Dump())
	}
	if !p.setup.status.Failing(setupKey) || p.drift.needFull {
		t.Fatal("the drift check should have read the kernel and the setup be failed")
	}
	if got := failedObjects(t, p, "setup"); got != 1 {
		t.Fatalf("failed setup objects = %v, want 1", got)
	}

	ipt.SetHook(nil)
	p.setup.status.RetryNow(setupKey)
	p.SyncNow()
	if p.setup.status.Failing(setupKey) || failedObjects(t, p, "setup") != 0 {
		t.Fatal("the retried setup should have succeeded")
	}
}

func TestProxierFailingObjectDoesNotForceFullSyncs(t *testing.T) {
	clock := fakekernel.NewClock()
	p, k, ipt, _ := newTestProxier(t, clocked(clock))
	// As in every cluster, a cluster IP is in use from the start, so that
	// the chains do not change with the Services added below.
	kubernetes := testobj.Service("10.96.0.1", testobj.Port("https", v1.ProtocolTCP, 443))
	kubernetes.Namespace, kubernetes.Name = "default", "kubernetes"
	p.OnServiceAdd(desired.ServiceOf(kubernetes))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow() // the first, full sync
	restores := len(ipt.Payloads)

	k.IPVS.SetHook(oplog.FailOnce("add-vs 10.96.0.10"))
	p.OnServiceAdd(desired.ServiceOf(testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))))
	p.SyncNow()
	if !p.drift.fullAt.IsZero() || p.drift.needFull {
		t.Fatal("a failed object must not schedule a full re-read")
	}
	// Another change right after is applied by a partial sync; the failed
	// object waits for its retry.
	other := testobj.Service("10.96.0.11", testobj.Port("", v1.ProtocolTCP, 80))
	other.Name = "other"
	p.OnServiceAdd(desired.ServiceOf(other))
	p.SyncNow()
	if len(ipt.Payloads) != restores {
		t.Fatal("a sync after a failed object ran a full sync")
	}
	if d := k.IPVS.Dump(); strings.Contains(d, "10.96.0.10:80/TCP") || !strings.Contains(d, "10.96.0.11:80/TCP") {
		t.Fatalf("only the other service should be programmed by now:\n%s", d)
	}
	clock.Advance(time.Hour)
	p.SyncNow()
	if d := k.IPVS.Dump(); !strings.Contains(d, "10.96.0.10:80/TCP") {
		t.Fatalf("the failed service should be programmed once due:\n%s", d)
	}
}

func TestProxierFirstSyncWritesCriticalServicesOverTheKernelsState(t *testing.T) {
	p, k, _, _ := newTestProxier(t)
	kubernetes := types.NamespacedName{Namespace: "default", Name: "kubernetes"}
	p.cfg.CriticalServices = []types.NamespacedName{kubernetes}
	// A restart: the kernel holds default/kubernetes with a real server
	// that has gone since.
	key := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 443}
	vs := ipvs.VirtualServer{Key: key, Scheduler: "rr"}
	for _, err := range k.IPVS.Write([]ipvs.Op{{Kind: ipvs.AddVS, VS: vs},
		{Kind: ipvs.AddRS, VS: vs, RS: ipvs.RealServer{Address: netip.MustParseAddr("10.0.0.9"), Port: 6443, Weight: 1}}}) {
		if err != nil {
			t.Fatal(err)
		}
	}

	web := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	web.Name = "web"
	api := testobj.Service("10.96.0.1", testobj.Port("https", v1.ProtocolTCP, 443))
	api.Namespace, api.Name = kubernetes.Namespace, kubernetes.Name
	eps := testobj.Slice("kubernetes", []discovery.EndpointPort{testobj.SlicePort("https", v1.ProtocolTCP, 6443)}, testobj.EP{IP: "10.0.0.1"})
	eps.Namespace, eps.Labels[discovery.LabelServiceName] = "default", "kubernetes"
	// Its address and ipset entries are in place.
	st, _ := desired.Compute(desired.ServiceOf(api), []*desired.Slice{desired.SliceOf(eps)}, &p.cfg.Desired, desired.Node{})
	_ = k.Links.EnsureLink()
	for _, err := range k.Links.AddAddresses(st.Addresses) {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range desired.IPv4Sets {
		_ = k.Sets.EnsureSet(s)
	}
	for _, e := range st.Entries {
		if err := k.Sets.AddEntry(e.Set, e.Entry); err != nil {
			t.Fatal(err)
		}
	}
	k.Ops()

	p.OnServiceAdd(desired.ServiceOf(web))
	p.OnServiceAdd(desired.ServiceOf(api))
	p.OnEndpointSliceAdd(desired.SliceOf(eps))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()

	if p.drift.failures != 0 || p.drift.lastFull.IsZero() {
		t.Fatal("the first sync failed: the critical Service's virtual server was added although the kernel had it")
	}
	ops := k.IPVS.TakeOps()
	want := []string{
		"add-rs 10.96.0.1:443/TCP 10.0.0.1:6443",
		"delete-rs 10.96.0.1:443/TCP 10.0.0.9:6443", // no connections: at once
		"add-vs 10.96.0.10:80/TCP",
	}
	got := slices.Clone(ops)
	slices.Sort(got[:min(2, len(got))]) // one virtual server's real servers come in any order
	if !slices.Equal(got, want) {
		t.Fatalf("ops %q, want %q: default/kubernetes first, its stale real server deleted", ops, want)
	}
	for _, op := range k.Ops() {
		if strings.Contains(op, "10.96.0.1 ") || strings.HasSuffix(op, "10.96.0.1") || strings.Contains(op, "10.96.0.1,") {
			t.Errorf("rewrote default/kubernetes's address or ipset entry: %s", op)
		}
	}
}

func TestFirstSyncWarnsOfCriticalServicesThatDoNotExist(t *testing.T) {
	k := fakekernel.Bare()
	core, logs := observer.New(zap.WarnLevel)
	critical := []types.NamespacedName{{Namespace: "default", Name: "kubernetes"}, {Namespace: "kube-system", Name: "kube-dns"}}
	p := New(Config{Desired: desired.Config{NodeName: "me"}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour, CriticalServices: critical},
		Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: &iptables.Fake{}},
		zap.New(core), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
	kube := testobj.Service("10.96.0.1", testobj.Port("https", v1.ProtocolTCP, 443))
	kube.Namespace, kube.Name = "default", "kubernetes"
	p.OnServiceAdd(desired.ServiceOf(kube))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	warned := logs.FilterMessageSnippet("critical services not found").All()
	if len(warned) != 1 || fmt.Sprint(warned[0].ContextMap()["missing"]) != "[kube-system/kube-dns]" {
		t.Fatalf("want one warning naming kube-system/kube-dns, got %+v", warned)
	}
	if !strings.Contains(k.IPVS.Dump(), "10.96.0.1:443/TCP") {
		t.Fatalf("the critical Service that exists was not programmed:\n%s", k.IPVS.Dump())
	}
}

func TestAfterFirstSyncRunsOnceAfterTheFirstSuccessfulSync(t *testing.T) {
	k := fakekernel.Bare()
	calls := make(chan struct{}, 10)
	p := New(Config{Desired: desired.Config{NodeName: "me"}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour, AfterFirstSync: func() { calls <- struct{}{} }},
		Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: &iptables.Fake{}},
		zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	// The kernel cannot be read: the first sync fails, twice. (A refused
	// write no longer fails a sync: see status.Table.)
	k.IPVS.SetHook(oplog.FailWith(errors.New("netlink receive: no buffer space available"), "list-", "get-", "read-"))
	web := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	p.OnServiceAdd(desired.ServiceOf(web))
	p.SyncNow()
	p.SyncNow()
	time.Sleep(50 * time.Millisecond) // it is called on a goroutine of its own
	if len(calls) != 0 || !p.drift.lastFull.IsZero() {
		t.Fatalf("called %d times after first syncs that could not read the kernel", len(calls))
	}
	k.IPVS.SetHook(nil)
	p.SyncNow()
	select {
	case <-calls:
	case <-time.After(10 * time.Second):
		t.Fatal("not called after the first successful sync")
	}
	p.SyncNow()
	p.SyncNow()
	time.Sleep(50 * time.Millisecond)
	if len(calls) != 0 {
		t.Fatalf("called %d more times", len(calls))
	}
}

// Under the race detector: syncs keep writing while drift checks run on
// their own goroutine, and what drifted behind the proxier's back is
// repaired by the sync that takes the check's read.
func TestProxierSyncsBesideBackgroundDriftChecks(t *testing.T) {
	p, k, _, _ := newTestProxier(t)
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	p.cfg.SyncPeriod = time.Nanosecond // a drift check is due at every sync
	want := map[string]bool{}
	for i := range 40 {
		s := testobj.Service(fmt.Sprintf("10.96.1.%d", i), testobj.Port("", v1.ProtocolTCP, 80))
		s.Name = fmt.Sprint("s", i)
		p.OnServiceAdd(desired.ServiceOf(s))
		want[s.Spec.ClusterIP] = true
		if i%4 == 3 {
			old := fmt.Sprintf("10.96.1.%d", i-2)
			gone := testobj.Service(old, testobj.Port("", v1.ProtocolTCP, 80))
			gone.Name = fmt.Sprint("s", i-2)
			p.OnServiceDelete(desired.ServiceOf(gone))
			delete(want, old)
		}
		if i == 20 {
			// Drift a check must find: a bound VIP goes.
			if err := k.Links.DeleteAddress(netip.MustParseAddr("10.96.1.0")); err != nil {
				t.Fatal(err)
			}
		}
		p.syncOnce(false)
	}
	// Inline syncs take the check in flight, then run a fresh one.
	p.SyncNow()
	p.SyncNow()
	var vips []string
	for a := range want {
		vips = append(vips, a)
	}
	slices.Sort(vips)
	if got := k.Links.Dump(); got != strings.Join(vips, "\n") {
		t.Errorf("kube-ipvs0 holds\n%s\nwant\n%s", got, strings.Join(vips, "\n"))
	}
	if n := strings.Count(k.IPVS.Dump(), "-A "); n != len(want) {
		t.Errorf("%d virtual servers, want %d:\n%s", n, len(want), k.IPVS.Dump())
	}
}

// clocked gives the proxier c as its clock of retry delays.
func clocked(c *fakekernel.Clock) func(*Config) { return func(cfg *Config) { cfg.Now = c.Now } }
