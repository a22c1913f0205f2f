package proxier

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
)

// Faults of iptables itself: a restore or save that fails, or hangs until
// its deadline (iptables.Exec kills it then; the fake's oplog.Hang stands for
// the wait). The iptables chains are retried with backoff while every sync
// goes on writing IPVS, addresses and set entries.

// externalService is ns/name on a cluster IP and an external IP, port 80:
// its external IP fills KUBE-EXTERNAL-IP, whose rules the chains then need.
func externalService(name, clusterIP, externalIP string) *v1.Service {
	s := testobj.Service(clusterIP, testobj.Port("", v1.ProtocolTCP, 80))
	s.Name = name
	s.Spec.ExternalIPs = []string{externalIP}
	return s
}

// proxierPastFirstSync is a test proxier past its first sync, with a cluster IP
// in use (default/kubernetes) and health of its own.
func proxierPastFirstSync(t *testing.T) (*Proxier, fakekernel.Kernel, *iptables.Fake, *healthz.State) {
	t.Helper()
	health := healthz.New(time.Minute)
	p, k, ipt, _ := newLoggingProxier(t, zap.NewNop(), health)
	kubernetes := testobj.Service("10.96.0.1", testobj.Port("https", v1.ProtocolTCP, 443))
	kubernetes.Namespace, kubernetes.Name = "default", "kubernetes"
	p.OnServiceAdd(desired.ServiceOf(kubernetes))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	if p.setup.status.Failing(setupKey) {
		t.Fatal("the first sync failed")
	}
	return p, k, ipt, health
}

func lastUpdated(h *healthz.State) time.Time {
	_, rep := h.Healthy()
	return rep.LastUpdated
}

// holdRun starts a run of g's chains on another goroutine, as a drift
// check does, and returns once it holds them; it runs on when release is
// called, and release returns when it has ended.
func holdRun(g *glue.Glue, ipt *iptables.Fake) (release func()) {
	held, proceed, ended := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var taken atomic.Bool
	ipt.SetHook(func(string) error {
		if taken.CompareAndSwap(false, true) { // the run's first call; others pass
			close(held)
			<-proceed
		}
		return nil
	})
	go func() {
		_, _, _ = g.Ensure(false)
		close(ended)
	}()
	<-held
	return func() {
		ipt.SetHook(nil)
		close(proceed)
		<-ended
	}
}

const externalRule = "--match-set KUBE-EXTERNAL-IP dst,dst -j KUBE-MARK-MASQ"

// TestSyncsGoOnWhileIPTablesFails: a failed iptables write does not hold
// back IPVS, addresses and set entries; the chains are not tried again
// before their backoff (which grows) is due; health is not marked updated
// meanwhile, as upstream's is not when iptables-restore fails; and the
// chains catch up, with health, once iptables works.
func TestSyncsGoOnWhileIPTablesFails(t *testing.T) {
	p, k, ipt, health := proxierPastFirstSync(t)
	before := lastUpdated(health)

	ipt.SetHook(oplog.FailWith(errors.New("iptables-restore: killed at its deadline"), "save", "restore"))
	p.OnServiceAdd(desired.ServiceOf(externalService("ext", "10.96.0.10", "192.0.2.10")))
	p.SyncNow()
	if d := k.IPVS.Dump(); !strings.Contains(d, "-A 192.0.2.10:80/TCP") {
		t.Fatalf("the Service waits for iptables:\n%s", d)
	}
	f, failing := p.setup.status.Failure(setupKey)
	if !failing || f.Attempts != 1 {
		t.Fatalf("the failed chains are not retried as the setup: %+v", f)
	}
	if lastUpdated(health) != before {
		t.Error("health marked updated by a sync whose iptables write failed")
	}

	// Before the retry is due, syncs do not run iptables at all, even for
	// a change the chains need (KUBE-EXTERNAL-IP-LOCAL filled).
	saves := ipt.Saves
	local := externalService("ext2", "10.96.0.11", "192.0.2.11")
	local.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	p.OnServiceAdd(desired.ServiceOf(local))
	p.SyncNow()
	if d := k.IPVS.Dump(); !strings.Contains(d, "-A 192.0.2.11:80/TCP") {
		t.Fatalf("the second Service waits for iptables:\n%s", d)
	}
	if ipt.Saves != saves {
		t.Errorf("iptables run %d times before the retry was due", ipt.Saves-saves)
	}
	// A retry that fails again waits longer.
	first := time.Until(f.RetryAt)
	p.setup.status.RetryNow(setupKey)
	p.SyncNow()
	if f, failing = p.setup.status.Failure(setupKey); !failing || f.Attempts != 2 || time.Until(f.RetryAt) <= first {
		t.Fatalf("second failure %+v: its retry must be further off than %s", f, first)
	}

	ipt.SetHook(nil)
	p.setup.status.RetryNow(setupKey)
	p.SyncNow()
	if p.setup.status.Failing(setupKey) {
		t.Fatal("the retry did not succeed")
	}
	if c := ipt.Dump(); !strings.Contains(c, externalRule) || !strings.Contains(c, "--match-set KUBE-EXTERNAL-IP-LOCAL") {
		t.Errorf("the chains did not catch up:\n%s", c)
	}
	if !lastUpdated(health).After(before) {
		t.Error("health not updated once iptables works")
	}
}

// syncWithin runs a background sync (the runner's) and fails the test if
// it does not return soon: a hung iptables must not hold it.
func syncWithin(t *testing.T, p *Proxier) {
	t.Helper()
	done := make(chan struct{})
	go func() { p.syncOnce(false); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a sync waited for a hung iptables")
	}
}

// TestHungIPTablesDoesNotHoldSyncs: once iptables has failed, its retries
// run beside the syncs, so that a retry that hangs until its deadline
// holds back no Service; the chains catch up once iptables answers again.
func TestHungIPTablesDoesNotHoldSyncs(t *testing.T) {
	p, k, ipt, _ := proxierPastFirstSync(t)
	ipt.SetHook(oplog.FailWith(errors.New("iptables-restore: killed at its deadline"), "save", "restore"))
	p.OnServiceAdd(desired.ServiceOf(externalService("ext", "10.96.0.10", "192.0.2.10")))
	p.SyncNow()

	hang := make(chan struct{})
	released := false
	release := func() {
		if !released {
			released = true
			close(hang)
		}
	}
	t.Cleanup(release)
	// entered closes when the retry is inside iptables: released earlier,
	// it would find the hook gone and succeed.
	entered := make(chan struct{})
	var once sync.Once
	hung := oplog.Hang(hang, "save", "restore")
	ipt.SetHook(func(op string) error {
		if strings.HasPrefix(op, "save") || strings.HasPrefix(op, "restore") {
			once.Do(func() { close(entered) })
		}
		return hung(op)
	})
	p.setup.status.RetryNow(setupKey)
	for i, vip := range []string{"192.0.2.11", "192.0.2.12"} {
		p.OnServiceAdd(desired.ServiceOf(externalService(fmt.Sprint("more", i), fmt.Sprintf("10.96.0.%d", 20+i), vip)))
		syncWithin(t, p)
		if d := k.IPVS.Dump(); !strings.Contains(d, "-A "+vip+":80/TCP") {
			t.Fatalf("%s waits for a hung iptables:\n%s", vip, d)
		}
	}
	if p.setup.retry == nil {
		t.Fatal("the due retry was not started")
	}

	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the retry never ran iptables")
	}
	release()
	ipt.SetHook(nil)
	p.SyncNow() // collects the retry killed at its deadline
	if f, failing := p.setup.status.Failure(setupKey); !failing || f.Attempts != 2 {
		t.Fatalf("the hung retry is not recorded as a failure: %+v", f)
	}
	p.setup.status.RetryNow(setupKey)
	syncWithin(t, p) // starts the retry
	p.SyncNow()      // and collects it
	if p.setup.status.Failing(setupKey) {
		t.Fatal("the retry did not succeed")
	}
	if c := ipt.Dump(); !strings.Contains(c, externalRule) {
		t.Errorf("the chains did not catch up:\n%s", c)
	}
}

// TestFirstSyncDoesNotWaitForAHungIPTables: the setup done while the
// informers list failed in iptables alone. The dummy link and the sets are
// there, so the first sync programs every Service at once and leaves the
// chains to a retry with backoff, rather than try iptables again.
func TestFirstSyncDoesNotWaitForAHungIPTables(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t)
	ipt.SetHook(oplog.FailWith(errors.New("iptables-save: killed at its deadline"), "save", "restore"))
	p.setup.early.steps = []chan error{make(chan error, 1)}
	p.setup.early.steps[0] <- p.setupKernel(false)
	hang := make(chan struct{})
	defer close(hang)
	ipt.SetHook(oplog.Hang(hang, "save", "restore"))

	p.OnServiceAdd(desired.ServiceOf(externalService("ext", "10.96.0.10", "192.0.2.10")))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	syncWithin(t, p)
	if d := k.IPVS.Dump(); !strings.Contains(d, "-A 192.0.2.10:80/TCP") {
		t.Fatalf("the first sync did not program the Service:\n%s", d)
	}
	if f, failing := p.setup.status.Failure(setupKey); !failing || f.Attempts != 1 {
		t.Fatalf("the early setup's failure is not retried with backoff: %+v", f)
	}
}

// TestSyncDoesNotWaitForAnotherIPTablesRun: while a drift check's (or a
// retry's) iptables run holds the glue for longer than aheadWait (a hung
// one), a sync that needs new rules writes IPVS and set entries after at
// most that wait and leaves the chains behind; the next sync after the run
// writes them.
func TestSyncDoesNotWaitForAnotherIPTablesRun(t *testing.T) {
	p, k, ipt, _ := proxierPastFirstSync(t)
	release := holdRun(p.glues[0], ipt) // another goroutine's run, however long it takes
	done := make(chan struct{})
	go func() {
		p.OnServiceAdd(desired.ServiceOf(externalService("ext", "10.96.0.10", "192.0.2.10")))
		p.SyncNow()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		release()
		t.Fatal("the sync waited for another goroutine's iptables run")
	}
	if d := k.IPVS.Dump(); !strings.Contains(d, "-A 192.0.2.10:80/TCP") {
		t.Errorf("the Service waited for iptables:\n%s", d)
	}
	if strings.Contains(ipt.Dump(), externalRule) {
		t.Error("the chains were written while another run held them")
	}
	release()
	p.SyncNow()
	if !strings.Contains(ipt.Dump(), externalRule) {
		t.Errorf("the chains did not catch up:\n%s", ipt.Dump())
	}
}

// TestAheadWriteWaitsForADriftCheck: rules a sync needs before its apply
// (here KUBE-EXTERNAL-IP's, for a Service's first external IP) are
// written ahead of it even while a drift check's iptables run holds the
// glue for a moment, so the Service never answers before its rules.
func TestAheadWriteWaitsForADriftCheck(t *testing.T) {
	p, k, ipt, _ := proxierPastFirstSync(t)
	late := false
	ipt.Canonical = func(rule string) string { // called as each rule is restored
		if strings.Contains(rule, "KUBE-EXTERNAL-IP") && strings.Contains(k.IPVS.Dump(), "-A 192.0.2.10:80/TCP") {
			late = true
		}
		return rule
	}
	release := holdRun(p.glues[0], ipt) // a drift check's run, which ends soon
	time.AfterFunc(200*time.Millisecond, release)
	p.OnServiceAdd(desired.ServiceOf(externalService("ext", "10.96.0.10", "192.0.2.10")))
	p.SyncNow()
	if d := k.IPVS.Dump(); !strings.Contains(d, "-A 192.0.2.10:80/TCP") {
		t.Fatalf("the Service was not programmed:\n%s", d)
	}
	if !strings.Contains(ipt.Dump(), externalRule) {
		t.Errorf("the Service's rules were not written:\n%s", ipt.Dump())
	}
	if late {
		t.Error("the Service's virtual server was programmed before its rules")
	}
}
