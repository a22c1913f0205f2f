package proxier

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

func TestTrackerCoalescesChangesPerService(t *testing.T) {
	notified := 0
	tr := newChangeTracker(func() { notified++ })
	a := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	tr.OnServiceAdd(desired.ServiceOf(a))
	b := a.DeepCopy()
	b.Spec.Ports[0].Port = 81
	tr.OnServiceUpdate(desired.ServiceOf(a), desired.ServiceOf(b))
	s := testobj.Slice("s-1", []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, testobj.EP{IP: "10.244.0.1"})
	tr.OnEndpointSliceAdd(desired.SliceOf(s))

	ins := tr.take(false)
	if len(ins) != 1 || ins[0].service.Ports[0].Port != 81 || len(ins[0].slices) != 1 {
		t.Fatalf("want one input with the latest service and its slice, got %+v", ins)
	}
	if ins[0].change.serviceEdits != 2 || ins[0].change.sliceEdits != 1 || notified != 3 {
		t.Fatalf("edits %+v, notified %d", ins[0].change, notified)
	}
	if len(tr.take(false)) != 0 {
		t.Fatal("take must clear pending changes")
	}
	if len(tr.take(true)) != 1 {
		t.Fatal("a full take lists every known service")
	}
}

func TestTrackerMovesRelabelledSlice(t *testing.T) {
	tr := newChangeTracker(nil)
	s := testobj.Slice("s-1", []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, testobj.EP{IP: "10.244.0.1"})
	tr.OnEndpointSliceAdd(desired.SliceOf(s))
	tr.take(false)
	moved := s.DeepCopy()
	moved.Labels[discovery.LabelServiceName] = "other"
	tr.OnEndpointSliceUpdate(desired.SliceOf(s), desired.SliceOf(moved))
	ins := tr.take(false)
	if len(ins) != 2 {
		t.Fatalf("both the old and the new owner changed, got %d inputs", len(ins))
	}
	for _, in := range ins {
		if in.name.Name == "s" && len(in.slices) != 0 {
			t.Fatal("the old owner still has the slice")
		}
	}
}

func TestTrackerPeekLeavesChangesPendingAndSortsSlices(t *testing.T) {
	tr := newChangeTracker(nil)
	tr.OnServiceAdd(desired.ServiceOf(testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))))
	for _, n := range []string{"s-b", "s-a", "s-c"} {
		tr.OnEndpointSliceAdd(desired.SliceOf(testobj.Slice(n, []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, testobj.EP{IP: "10.244.0.1"})))
	}
	other := testobj.Service("10.96.0.11", testobj.Port("", v1.ProtocolTCP, 80))
	other.Name = "other"
	tr.OnServiceAdd(desired.ServiceOf(other))

	s, absent := types.NamespacedName{Namespace: "ns", Name: "s"}, types.NamespacedName{Namespace: "ns", Name: "absent"}
	peeked := tr.peek([]types.NamespacedName{s, absent})
	if len(peeked) != 1 || peeked[0].name != s {
		t.Fatalf("peek = %+v; want s alone", peeked)
	}
	var names []string
	for _, sl := range peeked[0].slices {
		names = append(names, sl.Name)
	}
	if !slices.Equal(names, []string{"s-a", "s-b", "s-c"}) {
		t.Errorf("slices in order %v; want by name", names)
	}
	if ins := tr.take(false); len(ins) != 2 || ins[0].change == nil || ins[1].change == nil {
		t.Fatalf("after a peek, take = %+v; want both Services with their changes", ins)
	}
}

// Of a Service's metadata, only the scheduler annotation is programmed: an
// edit to it is a change, an edit to any other annotation is not.
func TestTrackerSeesSchedulerAnnotationEdits(t *testing.T) {
	tr := newChangeTracker(nil)
	a := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	tr.OnServiceAdd(desired.ServiceOf(a))
	tr.take(false)
	other := a.DeepCopy()
	other.Annotations = map[string]string{"team": "a"}
	tr.OnServiceUpdate(desired.ServiceOf(a), desired.ServiceOf(other))
	if n := len(tr.take(false)); n != 0 {
		t.Fatalf("another annotation queued %d changes", n)
	}
	sched := other.DeepCopy()
	sched.Annotations[desired.SchedulerAnnotation] = "lc"
	tr.OnServiceUpdate(desired.ServiceOf(other), desired.ServiceOf(sched))
	if ins := tr.take(false); len(ins) != 1 {
		t.Fatalf("the scheduler annotation queued %d changes, want 1", len(ins))
	}
}

// A Service deleted and made again with the same spec, seen only as an
// update (the watch missed the delete), is another Service: its UID and
// age decide the virtual servers it wins, so it is recomputed.
func TestTrackerCountsAnotherUIDAsAChange(t *testing.T) {
	tr := newChangeTracker(nil)
	a := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	a.UID = "first"
	tr.OnServiceAdd(desired.ServiceOf(a))
	tr.take(false)
	again := a.DeepCopy()
	again.ResourceVersion = "2"
	tr.OnServiceUpdate(desired.ServiceOf(a), desired.ServiceOf(again))
	if ins := tr.take(false); len(ins) != 0 {
		t.Fatalf("an update that changes nothing queued %+v", ins)
	}
	again.UID = "second"
	tr.OnServiceUpdate(desired.ServiceOf(a), desired.ServiceOf(again))
	if ins := tr.take(false); len(ins) != 1 || ins[0].service.UID != "second" {
		t.Fatalf("the Service made again was not queued: %+v", ins)
	}
}
