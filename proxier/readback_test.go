package proxier

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// addWeb feeds p Service ns/<name> (vip:80 → ips:8080) and syncs.
func addWeb(p *Proxier, name, vip string, ips ...string) {
	service := testobj.Service(vip, testobj.Port("", v1.ProtocolTCP, 80))
	service.Name = name
	var eps []testobj.EP
	for _, ip := range ips {
		eps = append(eps, testobj.EP{IP: ip})
	}
	es := testobj.Slice(name+"-1", []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, eps...)
	es.Labels[discovery.LabelServiceName] = name
	p.OnServiceAdd(desired.ServiceOf(service))
	p.OnEndpointSliceAdd(desired.SliceOf(es))
	p.SyncNow()
}

func refusals(ev *recordedEvents) []string {
	var out []string
	for _, e := range *ev {
		if strings.Contains(e, "KernelRefused") {
			out = append(out, e)
		}
	}
	return out
}

// Writes whose acknowledgements were lost (ENOBUFS) are read back: those
// the kernel did count as written, with no KernelRefused Event, no failed
// object, and nothing written again.
func TestLostAcknowledgementsAreReadBackNotReported(t *testing.T) {
	healthy, healthyKernel, _, _ := newTestProxier(t)
	twoWebServices(healthy)
	want := healthyKernel.Lines()

	clock := fakekernel.NewClock()
	p, k, _, ev := newTestProxier(t, clocked(clock))
	k.SetHook(oplog.LoseAnswers("add-"))
	twoWebServices(p)
	if got := k.Lines(); !slices.Equal(got, want) {
		t.Fatalf("kernel holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	expectNoRefusal(t, p, ev, "adds")
	k.SetHook(nil)
	k.Ops()
	clock.Advance(time.Minute)
	p.SyncNow()
	fakekernel.ExpectOps(t, k) // the belief holds what the kernel does

	// Deletes likewise: ns/other, idle, goes at once, every answer lost.
	k.SetHook(oplog.LoseAnswers("delete-"))
	other := testobj.Service("10.96.0.11", testobj.Port("", v1.ProtocolTCP, 80))
	other.Name = "other"
	p.OnServiceDelete(desired.ServiceOf(other))
	p.SyncNow()
	if got := k.Lines(); slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, "10.96.0.11") }) {
		t.Fatalf("ns/other left:\n%s", strings.Join(got, "\n"))
	}
	expectNoRefusal(t, p, ev, "deletes")
	k.SetHook(nil)
	k.Ops()
	clock.Advance(time.Minute)
	p.SyncNow()
	fakekernel.ExpectOps(t, k)
}

// An add that meets an object already there (one an earlier write whose
// answer was lost made, or someone else) is read back: the same object
// counts as written; a different one is a refusal, and the retry updates it.
func TestAnAddThatFindsItsObjectIsReadBack(t *testing.T) {
	clock := fakekernel.NewClock()
	p, k, _, ev := newTestProxier(t, clocked(clock))
	twoWebServices(p)
	k.Ops()
	key := func(vip string) ipvs.Key {
		return ipvs.Key{Address: netip.MustParseAddr(vip), Protocol: ipvs.TCP, Port: 80}
	}
	pod := ipvs.RealServer{Address: netip.MustParseAddr("10.244.2.1"), Port: 8080, Weight: 1}
	// Behind the proxier's back: 10.96.0.12 as its Service will want it,
	// 10.96.0.13 with another scheduler.
	for i, err := range k.IPVS.Write([]ipvs.Op{
		{Kind: ipvs.AddVS, VS: ipvs.VirtualServer{Key: key("10.96.0.12"), Scheduler: "rr"}},
		{Kind: ipvs.AddRS, VS: ipvs.VirtualServer{Key: key("10.96.0.12")}, RS: pod},
		{Kind: ipvs.AddVS, VS: ipvs.VirtualServer{Key: key("10.96.0.13"), Scheduler: "sh"}},
	}) {
		if err != nil {
			t.Fatalf("op %d: %v", i, err)
		}
	}
	k.Ops()

	addWeb(p, "same", "10.96.0.12", "10.244.2.1")
	if r := refusals(ev); len(r) != 0 {
		t.Fatalf("an add that found what it asked for was reported: %q", r)
	}
	if n := failedObjects(t, p, string(status.KindVirtualServer)) + failedObjects(t, p, string(status.KindRealServer)); n != 0 {
		t.Fatalf("%v failed IPVS objects, want none", n)
	}

	addWeb(p, "other-scheduler", "10.96.0.13", "10.244.2.1")
	if r := refusals(ev); len(r) != 1 || !strings.Contains(r[0], "10.96.0.13") {
		t.Fatalf("refusals %q, want one for 10.96.0.13's virtual server", r)
	}
	k.Ops()
	clock.Advance(2 * time.Second)
	p.SyncNow()
	// Its real server went in beside the failed add; the read took it.
	fakekernel.ExpectOps(t, k, "update-vs 10.96.0.13:80/TCP")
	if n := failedObjects(t, p, string(status.KindVirtualServer)); n != 0 {
		t.Fatalf("%v failed virtual servers after the update, want none", n)
	}
}

// expectNoRefusal checks that writes whose answers were lost left no
// refusal Event and no failed object.
func expectNoRefusal(t *testing.T, p *Proxier, ev *recordedEvents, writes string) {
	t.Helper()
	if r := refusals(ev); len(r) != 0 {
		t.Errorf("false refusals of %s: %q", writes, r)
	}
	for _, kind := range status.Kinds {
		if n := failedObjects(t, p, string(kind)); n != 0 {
			t.Errorf("%v failed %s objects after the %s, want none", n, kind, writes)
		}
	}
}
