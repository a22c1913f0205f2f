package proxier

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// twoWebServices feeds p Service ns/web (10.96.0.10:80 → 10.244.0.1 and
// 10.244.0.2) and ns/other (10.96.0.11:80 → 10.244.1.1) and syncs.
func twoWebServices(p *Proxier) {
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	for _, s := range []struct {
		name, vip string
		eps       []testobj.EP
	}{
		{"web", "10.96.0.10", []testobj.EP{{IP: "10.244.0.1"}, {IP: "10.244.0.2"}}},
		{"other", "10.96.0.11", []testobj.EP{{IP: "10.244.1.1"}}},
	} {
		service := testobj.Service(s.vip, testobj.Port("", v1.ProtocolTCP, 80))
		service.Name = s.name
		es := testobj.Slice(s.name+"-1", []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, s.eps...)
		es.Labels[discovery.LabelServiceName] = s.name
		p.OnServiceAdd(desired.ServiceOf(service))
		p.OnEndpointSliceAdd(desired.SliceOf(es))
	}
	p.SyncNow()
}

// failedAttempts is how often the one failed object of a kind was tried.
func failedAttempts(t *testing.T, p *Proxier, kind status.Kind) int {
	t.Helper()
	var all []status.Object
	for _, f := range p.rec.Failed() {
		if f.Kind == kind {
			all = append(all, f)
		}
	}
	if len(all) != 1 {
		t.Fatalf("%d failed %s objects, want 1", len(all), kind)
	}
	return all[0].Attempts
}

// One object the kernel refuses fails alone: every other object is
// programmed, later syncs retry only it, with a delay that doubles, health
// stays 200, and once the kernel takes it the status, gauge and log recover.
func TestProxierRetriesARefusedObjectAloneAndStaysHealthy(t *testing.T) {
	cases := []struct {
		kind    status.Kind
		refuse  string // the fake's op
		missing string // its line in kernelLines
	}{
		{status.KindRealServer, "add-rs 10.96.0.10:80/TCP 10.244.0.2:8080", "-a 10.96.0.10:80/TCP -r 10.244.0.2:8080 -w 1"},
		{status.KindAddress, "add-addr 10.96.0.10", "10.96.0.10"},
		{status.KindSetEntry, "add-entry KUBE-CLUSTER-IP 10.96.0.10,tcp:80", "add KUBE-CLUSTER-IP 10.96.0.10,tcp:80"},
	}
	// What the kernel holds when nothing is refused.
	healthyProxier, healthyKernel, _, _ := newTestProxier(t)
	twoWebServices(healthyProxier)
	want := healthyKernel.Lines()

	for _, c := range cases {
		t.Run(string(c.kind), func(t *testing.T) {
			logs, seen := observer.New(zapcore.DebugLevel)
			health := healthz.New(20 * time.Millisecond)
			clock := fakekernel.NewClock()
			p, k, _, ev := newLoggingProxier(t, zap.New(logs), health, clocked(clock))
			k.SetHook(oplog.Refuse(c.refuse))

			p.OnServicesSynced() // queued changes start health's clock
			p.health.QueuedUpdate()
			twoWebServices(p)
			wantNow := slices.DeleteFunc(slices.Clone(want), func(l string) bool { return l == c.missing })
			if got := k.Lines(); !slices.Equal(got, wantNow) {
				t.Fatalf("kernel holds\n%s\nwant everything but %q:\n%s", strings.Join(got, "\n"), c.missing, strings.Join(wantNow, "\n"))
			}
			if n := failedObjects(t, p, string(c.kind)); n != 1 {
				t.Fatalf("failed %s gauge = %v, want 1", c.kind, n)
			}
			if len(*ev) != 1 || !strings.Contains((*ev)[0], "Warning KernelRefused") || !strings.Contains((*ev)[0], "10.96.0.10") {
				t.Fatalf("events %q, want one KernelRefused warning on ns/web", *ev)
			}
			// The note names no node: the same refusal on every node is
			// one Event (its name is its content's), each node a reporter.
			if strings.Contains((*ev)[0], p.cfg.Desired.NodeName) {
				t.Fatalf("event %q names node %s", (*ev)[0], p.cfg.Desired.NodeName)
			}
			time.Sleep(30 * time.Millisecond) // past health's timeout
			livez := httptest.NewRecorder()
			health.Handler().ServeHTTP(livez, httptest.NewRequest("GET", "/livez", nil))
			if livez.Code != http.StatusOK {
				t.Fatalf("/livez answered %d with one refused object, want 200", livez.Code)
			}

			// Retried alone, after 1 s, then 2 s, then 4 s.
			k.Ops()
			for _, step := range []struct {
				wait     time.Duration
				attempts int
			}{{0, 1}, {time.Second, 2}, {time.Second, 2}, {time.Second, 3}, {3 * time.Second, 3}, {time.Second, 4}} {
				clock.Advance(step.wait)
				p.SyncNow()
				if got := failedAttempts(t, p, c.kind); got != step.attempts {
					t.Fatalf("after %s more: %d attempts, want %d", step.wait, got, step.attempts)
				}
				fakekernel.ExpectOps(t, k) // nothing else is written again
			}

			k.SetHook(nil)
			clock.Advance(8 * time.Second)
			p.SyncNow()
			if got := k.Lines(); !slices.Equal(got, want) {
				t.Fatalf("after the kernel takes it, kernel holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if n := failedObjects(t, p, string(c.kind)); n != 0 {
				t.Fatalf("failed %s gauge = %v after recovery, want 0", c.kind, n)
			}
			if w := seen.FilterMessageSnippet("kernel refused").Len(); w != 1 {
				t.Errorf("%d warning lines for one object over five failures, want 1", w)
			}
			if i := seen.FilterMessage("kernel object programmed after failing").FilterField(zap.Int("attempts", 4)).Len(); i != 1 {
				t.Errorf("%d recovery lines naming 4 attempts, want 1", i)
			}
		})
	}
}
