package reconciler

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// fakeConntrack records what it is asked to clear.
type fakeConntrack struct {
	cleared [][]conntrack.Stale
	err     error
}

func (f *fakeConntrack) Clear(stale []conntrack.Stale) (int, error) {
	f.cleared = append(f.cleared, slices.Clone(stale))
	return len(stale), f.err
}

func udpState(vip string, reals ...string) desired.State {
	st := state(vip, 53, reals...)
	st.VirtualServers[0].Virtual.Key.Protocol = ipvs.UDP
	st.Entries[0].Entry.Protocol = ipset.EntryUDP
	return st
}

func TestRemovedUDPRealServerClearsItsFlows(t *testing.T) {
	k := fakekernel.New(t)
	ct := &fakeConntrack{}
	r := New(Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, Conntrack: ct}, testOptions())
	const svc = "dns"

	record(r, svc, udpState("10.96.0.10", "10.244.0.1:5353", "10.244.0.2:5353"))
	mustSync(t, r)
	if len(ct.cleared) != 0 {
		t.Fatalf("a new virtual server cleared flows: %v", ct.cleared)
	}

	record(r, svc, udpState("10.96.0.10", "10.244.0.2:5353"))
	mustSync(t, r)
	want := conntrack.Stale{VIP: netip.MustParseAddrPort("10.96.0.10:53"), Keep: []netip.AddrPort{netip.MustParseAddrPort("10.244.0.2:5353")}}
	if len(ct.cleared) != 1 || len(ct.cleared[0]) != 1 || !equalStale(ct.cleared[0][0], want) {
		t.Fatalf("cleared %v, want one pass for %v", ct.cleared, want)
	}
	if got := r.Outcome().ConntrackCleared[desired.IPv4]; got != 1 {
		t.Errorf("work counts %d cleared entries, want 1", got)
	}

	// Its last real server gone: nothing left to keep, nothing cleared, as
	// upstream (IPVS answers no packet of the flow then); nor when one comes.
	record(r, svc, udpState("10.96.0.10"))
	mustSync(t, r)
	record(r, svc, udpState("10.96.0.10", "10.244.0.3:5353"))
	mustSync(t, r)
	if len(ct.cleared) != 1 {
		t.Fatalf("cleared %v, want the first pass only", ct.cleared)
	}

	// TCP real servers drain instead; their flows are left alone.
	record(r, "web", state("10.96.0.11", 80, "10.244.0.1:8080", "10.244.0.2:8080"))
	mustSync(t, r)
	record(r, "web", state("10.96.0.11", 80, "10.244.0.2:8080"))
	mustSync(t, r)
	if len(ct.cleared) != 1 {
		t.Errorf("a TCP real server's removal cleared flows: %v", ct.cleared[1:])
	}

	ct.err = errors.New("no ctnetlink")
	record(r, svc, udpState("10.96.0.10", "10.244.0.4:5353"))
	mustSync(t, r)
	if len(ct.cleared) != 2 {
		t.Fatalf("replacing the real server cleared %v, want a second pass", ct.cleared)
	}
	if err := r.Outcome().ConntrackErr; err == nil {
		t.Error("a failed clear was not reported")
	}
	mustSync(t, r)
	if len(ct.cleared) != 2 {
		t.Errorf("a failed clear is kept for retry: cleared %v", ct.cleared[2:])
	}
}

func equalStale(a, b conntrack.Stale) bool {
	return a.VIP == b.VIP && slices.Equal(a.Keep, b.Keep)
}
