package serviceview

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler/realset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// belief is a Belief of plain maps.
type belief struct {
	vs    map[objects.Key]objects.VirtualServer
	reals map[objects.Key]*realset.Set
	addr  map[netip.Addr]bool
}

func (b belief) VirtualServer(k objects.Key) (objects.VirtualServer, *realset.Set, bool) {
	vs, ok := b.vs[k]
	return vs, b.reals[k], ok
}
func (b belief) Address(a netip.Addr) bool     { return b.addr[a] }
func (b belief) Entry(e desired.SetEntry) bool { return false }

func rs(addrPort string, weight int) objects.RealServer {
	ap := netip.MustParseAddrPort(addrPort)
	return objects.RealServer{Address: ap.Addr(), Port: ap.Port(), Weight: int32(weight)}
}

// A Service's view sets each object it wants beside the belief, lists the
// held real servers it no longer wants (those that drain), and finds its
// failed objects by name among all of them.
func TestStateShowsEachServiceBesideTheBelief(t *testing.T) {
	vip := netip.MustParseAddr("10.96.0.1")
	key := objects.Key{Address: vip, Protocol: objects.TCP, Port: 80}
	virtual := objects.VirtualServer{Key: key, Scheduler: "rr"}
	web := types.NamespacedName{Namespace: "ns", Name: "web"}
	other := types.NamespacedName{Namespace: "a", Name: "other"}
	programmed := time.Unix(1000, 0)
	failure := status.Failure{Err: errors.New("refused"), Attempts: 1}
	failed := []status.Object{
		{Kind: status.KindAddress, Object: "10.96.0.9", Failure: failure}, // no Service's
		{Kind: status.KindRealServer, Object: "10.96.0.1:80/TCP 10.244.0.2:8080", Failure: failure},
		{Kind: status.KindSetEntry, Object: "KUBE-IPVS-IPS 10.96.0.1", Failure: failure},
	}
	wanted := desired.VirtualServer{Virtual: virtual, Reals: []objects.RealServer{rs("10.244.0.1:8080", 1), rs("10.244.0.2:8080", 1)}}
	s := Services{
		Wanted: map[types.NamespacedName]desired.Keys{
			web: {
				VirtualServers: []objects.Key{key},
				Addresses:      []netip.Addr{vip},
				Entries:        []desired.SetEntry{{Set: desired.SetIPVSIPs, Entry: objects.Entry{IP: vip}}},
			},
			other: {Addresses: []netip.Addr{netip.MustParseAddr("10.96.0.2")}},
		},
		WantOf: func(k objects.Key, owner types.NamespacedName) (desired.VirtualServer, bool) {
			return wanted, k == key && owner == web
		},
		Programmed: map[types.NamespacedName]time.Time{web: programmed},
		Belief: belief{
			vs:    map[objects.Key]objects.VirtualServer{key: virtual},
			reals: map[objects.Key]*realset.Set{key: realset.New([]objects.RealServer{rs("10.244.0.1:8080", 1), rs("10.244.0.3:8080", 0)})},
			addr:  map[netip.Addr]bool{vip: true},
		},
		Failed: failed,
	}

	all := State(s, nil)
	if len(all.Services) != 2 || all.Services[0].Name != "a/other" || len(all.Failed) != 3 {
		t.Fatalf("state of all %+v; want both Services in name order and every failure", all)
	}
	got := State(s, []types.NamespacedName{web, {Namespace: "ns", Name: "gone"}})
	if len(got.Services) != 1 {
		t.Fatalf("services %+v; want web alone", got.Services)
	}
	svc := got.Services[0]
	if svc.Name != "ns/web" || !svc.Programmed.Equal(programmed) || len(svc.VirtualServers) != 1 {
		t.Fatalf("service %+v", svc)
	}
	vs := svc.VirtualServers[0]
	wantReals := []struct {
		address      string
		weight       int
		wanted, held bool
	}{
		{"10.244.0.1:8080", 1, true, true},
		{"10.244.0.2:8080", 1, true, false},
		{"10.244.0.3:8080", 0, false, true}, // held, no longer wanted: drains
	}
	if !vs.Held || vs.Key != "10.96.0.1:80/TCP" || len(vs.Reals) != len(wantReals) {
		t.Fatalf("virtual server %+v", vs)
	}
	for i, w := range wantReals {
		if r := vs.Reals[i]; r.Address != w.address || r.Weight != w.weight || r.Wanted != w.wanted || r.Held != w.held {
			t.Errorf("real server %d is %+v, want %+v", i, r, w)
		}
	}
	if len(svc.Addresses) != 1 || !svc.Addresses[0].Held || len(svc.Entries) != 1 || svc.Entries[0].Held {
		t.Errorf("addresses %+v, entries %+v", svc.Addresses, svc.Entries)
	}
	if len(svc.Failed) != 2 || svc.Failed[0] != failed[1] || svc.Failed[1] != failed[2] {
		t.Errorf("failed %+v, want its real server's and its entry's", svc.Failed)
	}
}
