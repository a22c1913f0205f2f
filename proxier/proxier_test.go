package proxier

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

type recordedEvents []string

func (r *recordedEvents) Eventf(_, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	*r = append(*r, eventtype+" "+reason+" "+fmt.Sprintf(note, args...))
}

func newTestProxier(t *testing.T) (*Proxier, fakeKernel, *iptables.Fake, *recordedEvents) {
	k := fakeKernel{ipvs.NewFake(), dummyiface.NewFake(), ipset.NewFake()}
	ipt := &iptables.Fake{}
	ev := &recordedEvents{}
	p := New(Config{NodeName: "me", SyncPeriod: time.Hour, MasqueradeBit: 14},
		Kernel{IPVS: k.ipvs, Links: k.links, Sets: k.sets, IPTables: ipt},
		zap.NewNop(), healthz.New(time.Minute), metrics.New(), ev)
	return p, k, ipt, ev
}

func TestProxierSyncsOnlyAfterCachesAndOnlyWhatChanged(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t)
	web := svc("10.96.0.10", port("", v1.ProtocolTCP, 80))
	web.Name = "web"
	p.OnServiceAdd(web)
	p.SyncNow()
	if k.ipvs.Dump() != "" || len(ipt.Payloads) != 0 {
		t.Fatal("synced before the caches were synced")
	}
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	if !strings.Contains(k.ipvs.Dump(), "-A 10.96.0.10:80/TCP -s rr") || len(ipt.Payloads) != 1 {
		t.Fatalf("first (full) sync did not program the service and the glue:\n%s", k.ipvs.Dump())
	}
	if len(k.sets.SetNames()) != len(ipv4Sets) {
		t.Fatalf("sets %v", k.sets.SetNames())
	}
	k.ops()

	s := slice("web-1", []discovery.EndpointPort{sport("", v1.ProtocolTCP, 8080)}, ep{ip: "10.244.0.1"})
	s.Labels[discovery.LabelServiceName] = "web"
	p.OnEndpointSliceAdd(s)
	p.SyncNow()
	expectOps(t, k, "add-rs 10.96.0.10:80/TCP 10.244.0.1:8080")
	if len(ipt.Payloads) != 1 {
		t.Fatal("a partial sync rewrote iptables")
	}

	// An update that changes nothing the proxier uses is not even queued.
	same := s.DeepCopy()
	same.ResourceVersion = "2"
	p.OnEndpointSliceUpdate(s, same)
	if svcs, eps := p.pendingCounts(); svcs+eps != 0 {
		t.Fatalf("no-op update queued %d+%d changes", svcs, eps)
	}

	p.OnServiceDelete(web)
	p.SyncNow()
	if k.ipvs.Dump() != "" || k.links.Dump() != "" {
		t.Fatalf("deleted service left state:\n%s\n%s", k.ipvs.Dump(), k.links.Dump())
	}
}

func TestProxierReportsBadInputOnce(t *testing.T) {
	p, k, _, ev := newTestProxier(t)
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	bad := svc("10.96.0.10", port("a", v1.ProtocolTCP, 80), port("b", "ICMP", 81))
	p.OnServiceAdd(bad)
	p.SyncNow()
	p.needFull = true // a drift check must not repeat it
	p.SyncNow()
	if len(*ev) != 1 || !strings.Contains((*ev)[0], "Warning InvalidService") || !strings.Contains((*ev)[0], `"ICMP"`) {
		t.Fatalf("events %q, want one warning naming the bad protocol", *ev)
	}
	if !strings.Contains(k.ipvs.Dump(), "-A 10.96.0.10:80/TCP") {
		t.Fatal("the good port must still be programmed")
	}
}

func TestProxierKeepsDeletionsAcrossAFailedDriftCheck(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t)
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	web := svc("10.96.0.10", port("", v1.ProtocolTCP, 80))
	p.OnServiceAdd(web)
	p.SyncNow()
	if k.ipvs.Dump() == "" {
		t.Fatal("service not programmed")
	}

	// The Service is deleted while a drift check is due and fails before it
	// reads the kernel: the deletion is applied all the same, and the drift
	// check is retried.
	p.OnServiceDelete(web)
	p.needFull = true
	ipt.FailRestore = fmt.Errorf("iptables-restore: injected failure")
	p.SyncNow()
	if k.ipvs.Dump() != "" || k.links.Dump() != "" {
		t.Fatalf("deletion held back by a failing drift check:\n%s\n%s", k.ipvs.Dump(), k.links.Dump())
	}
	if p.fullAt.IsZero() {
		t.Fatal("the failed drift check must be retried")
	}

	ipt.FailRestore = nil
	p.fullAt = time.Now()
	p.SyncNow()
	if !p.fullAt.IsZero() || p.failures != 0 || len(ipt.Payloads) == 0 {
		t.Fatal("the retried drift check should have succeeded")
	}
}

func TestProxierFailingObjectDoesNotForceFullSyncs(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t)
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow() // the first, full sync
	restores := len(ipt.Payloads)

	k.ipvs.FailNext = "add-vs 10.96.0.10"
	p.OnServiceAdd(svc("10.96.0.10", port("", v1.ProtocolTCP, 80)))
	p.SyncNow()
	if p.fullAt.IsZero() {
		t.Fatal("a failed sync must schedule a full re-read")
	}
	// Another change right after is applied by a partial sync, which also
	// retries the failed object.
	other := svc("10.96.0.11", port("", v1.ProtocolTCP, 80))
	other.Name = "other"
	p.OnServiceAdd(other)
	p.SyncNow()
	if len(ipt.Payloads) != restores {
		t.Fatal("a sync before the backoff ran a full sync")
	}
	if d := k.ipvs.Dump(); !strings.Contains(d, "10.96.0.10:80/TCP") || !strings.Contains(d, "10.96.0.11:80/TCP") {
		t.Fatalf("both services should be programmed by now:\n%s", d)
	}
}
