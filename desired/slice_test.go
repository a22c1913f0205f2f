package desired

import (
	"fmt"
	"testing"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// A slice is read as the API documents its optional fields: an unset
// condition ready or serving is true, terminating false; an unset port
// name "", protocol TCP, port 0; the first address is the endpoint's.
func TestSliceOfResolvesUnsetFields(t *testing.T) {
	in := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1", ResourceVersion: "9",
			Labels:      map[string]string{discovery.LabelServiceName: "web", "other": "x"},
			Annotations: map[string]string{v1.EndpointsLastChangeTriggerTime: "2026-11-28T10:00:00.5Z"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{}, {Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](53)}},
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.244.0.1", "10.244.0.9"}},
			{Addresses: []string{"10.244.0.2"}, NodeName: ptr.To("n1"), Conditions: discovery.EndpointConditions{
				Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)},
				Hints: &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "a"}}, ForNodes: []discovery.ForNode{{Name: "n1"}}}},
			{Hints: &discovery.EndpointHints{}},
		},
	}
	got := SliceOf(in)
	want := &Slice{Namespace: "ns", Name: "web-1", ResourceVersion: "9", Service: "web", AddressType: discovery.AddressTypeIPv4,
		TriggerTime: time.Date(2026, 11, 28, 10, 0, 0, 5e8, time.UTC),
		Ports:       []SlicePort{{Protocol: v1.ProtocolTCP}, {Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}},
		Endpoints: []SliceEndpoint{
			{Address: "10.244.0.1", Ready: true, Serving: true},
			{Address: "10.244.0.2", NodeName: "n1", Terminating: true, Hints: &SliceHints{Zones: []string{"a"}, Nodes: []string{"n1"}}},
			{Ready: true, Serving: true},
		},
	}
	if got.Namespace != want.Namespace || got.Name != want.Name || got.ResourceVersion != want.ResourceVersion ||
		got.Service != want.Service || !got.TriggerTime.Equal(want.TriggerTime) || !got.SameEndpoints(want) {
		t.Fatalf("read\n%+v\nwant\n%+v", got, want)
	}
	in.Annotations[v1.EndpointsLastChangeTriggerTime] = "yesterday"
	if got := SliceOf(in); !got.TriggerTime.IsZero() {
		t.Errorf("an unparsable trigger time read as %v", got.TriggerTime)
	}
}

// SameEndpoints tells apart every field that programs the kernel.
func TestSameEndpoints(t *testing.T) {
	base := func() *Slice {
		return &Slice{AddressType: discovery.AddressTypeIPv4, Ports: []SlicePort{{Protocol: v1.ProtocolTCP, Port: 80}},
			Endpoints: []SliceEndpoint{{Address: "10.244.0.1", NodeName: "n1", Ready: true, Serving: true,
				Hints: &SliceHints{Zones: []string{"a"}}}}}
	}
	for name, edit := range map[string]func(*Slice){
		"address type": func(s *Slice) { s.AddressType = discovery.AddressTypeIPv6 },
		"port":         func(s *Slice) { s.Ports[0].Port = 81 },
		"port name":    func(s *Slice) { s.Ports[0].Name = "http" },
		"address":      func(s *Slice) { s.Endpoints[0].Address = "10.244.0.2" },
		"node":         func(s *Slice) { s.Endpoints[0].NodeName = "n2" },
		"ready":        func(s *Slice) { s.Endpoints[0].Ready = false },
		"serving":      func(s *Slice) { s.Endpoints[0].Serving = false },
		"terminating":  func(s *Slice) { s.Endpoints[0].Terminating = true },
		"zone hint":    func(s *Slice) { s.Endpoints[0].Hints.Zones[0] = "b" },
		"no hints":     func(s *Slice) { s.Endpoints[0].Hints = nil },
		"node hint":    func(s *Slice) { s.Endpoints[0].Hints.Nodes = []string{"n1"} },
		"endpoints":    func(s *Slice) { s.Endpoints = append(s.Endpoints, SliceEndpoint{}) },
	} {
		changed := base()
		edit(changed)
		if base().SameEndpoints(changed) || changed.SameEndpoints(base()) {
			t.Errorf("a changed %s counts as the same", name)
		}
	}
	other := base()
	other.Name, other.ResourceVersion, other.TriggerTime = "x", "2", time.Now()
	if !base().SameEndpoints(other) {
		t.Error("a slice that programs the same counts as changed")
	}
}

// Endpoints on one node share its name's bytes, as decoded from protobuf
// (where each is a string of its own).
func TestSliceOfSharesNodeNames(t *testing.T) {
	in := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1"}}
	for i := range 10 {
		node := "n1"
		if i >= 8 {
			node = "n2"
		}
		in.Endpoints = append(in.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.244.0.%d", i)}, NodeName: ptr.To(node)})
	}
	raw, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	decoded := &discovery.EndpointSlice{}
	if err := decoded.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	data := func(s string) *byte { return unsafe.StringData(s) }
	if data(*decoded.Endpoints[0].NodeName) == data(*decoded.Endpoints[1].NodeName) {
		t.Fatal("the decoder shared the node names already: the test's premise")
	}
	eps := SliceOf(decoded).Endpoints
	if data(eps[0].NodeName) != data(eps[7].NodeName) || data(eps[8].NodeName) != data(eps[9].NodeName) || eps[7].NodeName == eps[8].NodeName {
		t.Error("endpoints on one node do not share its name, or on two nodes do")
	}
}
