package proxier

import (
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
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

// A panic while computing one Service's state skips that Service, with
// one Error line carrying the stack and one Event, and the others are
// programmed. The panicking input is a nil EndpointSlice, which the
// tracker never holds but desired.Compute does not guard against.
func TestPanicOnOneServiceSkipsItAlone(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	p, k, _, ev := newLoggingProxier(t, zap.New(core), healthz.New(time.Minute))
	web := testobj.Service("10.96.0.10", testobj.Port("http", v1.ProtocolTCP, 80))
	web.Name = "web"
	sl := testobj.Slice("web-1", []discovery.EndpointPort{testobj.SlicePort("http", v1.ProtocolTCP, 8080)}, testobj.EP{IP: "10.244.0.1"})
	sl.Labels[discovery.LabelServiceName] = "web"
	bad := testobj.Service("10.96.0.66", testobj.Port("http", v1.ProtocolTCP, 80))
	bad.Name = "bad"
	for _, s := range []*v1.Service{web, bad} {
		p.OnServiceAdd(desired.ServiceOf(s))
	}
	p.OnEndpointSliceAdd(desired.SliceOf(sl))
	p.changeTracker.slices[testobj.Name("bad")] = []*desired.Slice{nil}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("desired.Compute no longer panics on a nil slice: pick another panicking input for this test")
			}
		}()
		desired.Compute(desired.ServiceOf(bad), []*desired.Slice{nil}, &p.cfg.Desired, desired.Node{})
	}()
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	p.drift.needFull = true
	p.OnServiceUpdate(desired.ServiceOf(bad), desired.ServiceOf(bad.DeepCopy())) // recomputed, same panic
	p.SyncNow()

	if dump := k.IPVS.Dump(); !strings.Contains(dump, "-A 10.96.0.10:80/TCP") || !strings.Contains(dump, "10.244.0.1:8080") ||
		strings.Contains(dump, "10.96.0.66") {
		t.Fatalf("want web programmed and bad not:\n%s", dump)
	}
	if len(*ev) != 1 || !strings.Contains((*ev)[0], "Warning InvalidService") || !strings.Contains((*ev)[0], "internal error") {
		t.Fatalf("events %q, want one naming the internal error", *ev)
	}
	panics := logs.FilterMessageSnippet("panic").All()
	if len(panics) != 1 || panics[0].Level != zapcore.ErrorLevel || !strings.Contains(panics[0].ContextMap()["stack"].(string), "desired.Compute") {
		t.Fatalf("want one Error line with the stack, got %+v", panics)
	}
}
