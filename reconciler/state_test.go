package reconciler

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// The state view shows what a Service wants beside what is held, its
// failed objects with their errors, and when it was last fully programmed.
func TestStateShowsWantedHeldAndFailed(t *testing.T) {
	k := fakekernel.New(t)
	clock := fakekernel.NewClock()
	r := testReconciler(k, clocked(clock))
	a := testobj.Name("a")
	r.Record([]Change{{Name: a, State: state("10.96.0.1", 80, "10.244.0.1:8080", "10.244.0.2:8080")}})
	st := r.State(a)
	if len(st.Services) != 1 || st.Services[0].VirtualServers[0].Held || !st.Services[0].Programmed.IsZero() {
		t.Fatalf("before a sync, the Service is held or programmed: %+v", st)
	}

	k.IPVS.SetHook(oplog.Refuse("add-rs 10.96.0.1:80/TCP 10.244.0.2:8080"))
	r.Sync(nil, nil)
	svc := r.State(a).Services[0]
	vs := svc.VirtualServers[0]
	if !vs.Held || vs.Key != "10.96.0.1:80/TCP" || vs.Scheduler != "rr" {
		t.Errorf("virtual server %+v, want held", vs)
	}
	if len(vs.Reals) != 2 || !vs.Reals[0].Held || vs.Reals[1].Held || !vs.Reals[1].Wanted {
		t.Errorf("real servers %+v, want the first held and the second not", vs.Reals)
	}
	if len(svc.Failed) != 1 || svc.Failed[0].Kind != status.KindRealServer || !strings.Contains(svc.Failed[0].Err.Error(), "refused") {
		t.Errorf("failed %+v, want the refused real server", svc.Failed)
	}
	if !svc.Programmed.IsZero() {
		t.Errorf("programmed at %v with a real server missing", svc.Programmed)
	}
	if all := r.State(); len(all.Failed) != 1 || len(all.Services) != 1 {
		t.Errorf("whole state %+v, want one Service and one failed object", all)
	}

	k.IPVS.SetHook(nil)
	clock.Advance(status.RetryFirst)
	r.Sync(nil, nil)
	svc = r.State(a).Services[0]
	if !svc.VirtualServers[0].Reals[1].Held || len(svc.Failed) != 0 || !svc.Programmed.Equal(clock.Now()) {
		t.Errorf("after the retry: %+v, want all held, none failed, programmed now", svc)
	}
	out, err := json.Marshal(r.State())
	if err != nil || !strings.Contains(string(out), `"key":"10.96.0.1:80/TCP"`) || !strings.Contains(string(out), `"failed":[]`) {
		t.Errorf("JSON %s, %v", out, err)
	}
}
