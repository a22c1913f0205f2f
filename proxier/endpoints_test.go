package proxier

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TestNodeHintsIgnoredByGate: with PreferSameTrafficDistribution off,
// node hints count for nothing and the zone's hints decide, as upstream.
func TestNodeHintsIgnoredByGate(t *testing.T) {
	tcp := v1.ProtocolTCP
	hinted := []*discovery.EndpointSlice{slice("a", []discovery.EndpointPort{sport("", tcp, 8080)},
		ep{ip: "10.244.0.1", ready: yes, node: "me", zones: []string{"zone-a"}, nodes: []string{"me"}},
		ep{ip: "10.244.0.2", ready: yes, zones: []string{"zone-a"}, nodes: []string{"other"}},
		ep{ip: "10.244.0.3", ready: yes, zones: []string{"zone-b"}, nodes: []string{"other"}})}
	for ignore, want := range map[bool][]string{
		false: {"10.244.0.1:8080"},
		true:  {"10.244.0.1:8080", "10.244.0.2:8080"},
	} {
		cfg := &Config{NodeName: "me", Scheduler: "rr", IgnoreNodeHints: ignore}
		st, problems := desiredState(svc("10.96.0.83", port("", tcp, 80)), hinted, cfg, nodeAddrs{zone: "zone-a"})
		if len(problems) > 0 || len(st.virtualServers) != 1 {
			t.Fatalf("node hints ignored %v: %d virtual servers, problems %v", ignore, len(st.virtualServers), problems)
		}
		var got []string
		for _, r := range st.virtualServers[0].real {
			got = append(got, r.ID().String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("node hints ignored %v: real servers %v, want %v\n%s", ignore, got, want, render(st))
		}
	}
}
