package desired

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

// TestNodeHintsIgnoredByGate: with PreferSameTrafficDistribution off,
// node hints count for nothing and the zone's hints decide, as upstream.
func TestNodeHintsIgnoredByGate(t *testing.T) {
	tcp := v1.ProtocolTCP
	hinted := []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)},
		testobj.EP{IP: "10.244.0.1", Ready: testobj.Yes, Node: "me", Zones: []string{"zone-a"}, Nodes: []string{"me"}},
		testobj.EP{IP: "10.244.0.2", Ready: testobj.Yes, Zones: []string{"zone-a"}, Nodes: []string{"other"}},
		testobj.EP{IP: "10.244.0.3", Ready: testobj.Yes, Zones: []string{"zone-b"}, Nodes: []string{"other"}})}
	for ignore, want := range map[bool][]string{
		false: {"10.244.0.1:8080"},
		true:  {"10.244.0.1:8080", "10.244.0.2:8080"},
	} {
		cfg := &Config{NodeName: "me", Scheduler: "rr", IgnoreNodeHints: ignore}
		st, problems := Compute(testobj.Service("10.96.0.83", testobj.Port("", tcp, 80)), hinted, cfg, Node{Zone: "zone-a"})
		if len(problems) > 0 || len(st.VirtualServers) != 1 {
			t.Fatalf("node hints ignored %v: %d virtual servers, problems %v", ignore, len(st.VirtualServers), problems)
		}
		var got []string
		for _, r := range st.VirtualServers[0].Reals {
			got = append(got, r.ID().String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("node hints ignored %v: real servers %v, want %v\n%s", ignore, got, want, st.String())
		}
	}
}
