package proxier

import (
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

// TestOneLinePerSync: each sync logs one line, at Info with its counts and
// time, and at debug level with where the time went.
func TestOneLinePerSync(t *testing.T) {
	for _, c := range []struct {
		level  zapcore.Level
		fields int
	}{{zapcore.InfoLevel, 5}, {zapcore.DebugLevel, 9}} {
		core, logs := observer.New(c.level)
		p, _, _, _ := newLoggingProxier(t, zap.New(core), healthz.New(time.Minute))
		p.OnServiceAdd(desired.ServiceOf(testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))))
		p.OnServicesSynced()
		p.OnEndpointSlicesSynced()
		p.SyncNow()
		p.OnServiceAdd(desired.ServiceOf(testobj.Service("10.96.0.11", testobj.Port("", v1.ProtocolTCP, 80))))
		p.SyncNow()
		synced := logs.FilterMessage("synced").All()
		if len(synced) != 2 {
			t.Fatalf("level %s: %d sync lines for 2 syncs", c.level, len(synced))
		}
		last := synced[1]
		if last.Level != c.level || last.ContextMap()["kernelOps"] == int64(0) || len(last.Context) < c.fields {
			t.Errorf("level %s: line %v %v", c.level, last.Level, last.ContextMap())
		}
		if c.level == zapcore.InfoLevel && len(last.Context) != c.fields {
			t.Errorf("Info line has details: %v", last.ContextMap())
		}
	}
}
