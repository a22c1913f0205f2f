package reconciler

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestDeletedServiceDrains: a deleted TCP Service keeps its virtual server
// and address while a connection lasts, then goes whole; a UDP one, one
// without real servers, or one on an address not bound to kube-ipvs0 (a
// node port) goes at once; one re-created meanwhile is served again as it
// was.
func TestDeletedServiceDrains(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	web := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	pod := netip.MustParseAddrPort("10.244.0.1:8080")
	record(r, "web", state("10.96.0.1", 80, pod.String()))
	record(r, "dns", udpState("10.96.0.2", "10.244.0.2:5353"))
	record(r, "empty", state("10.96.0.3", 80))
	nodePort := state("10.96.0.4", 80, "10.244.0.4:8080")
	nodePort.VirtualServers = append(nodePort.VirtualServers, desired.VirtualServer{
		Virtual: ipvs.VirtualServer{Key: ipvs.Key{Address: netip.MustParseAddr("10.0.2.15"), Protocol: ipvs.TCP, Port: 30080}, Scheduler: "rr"},
		Reals:   []ipvs.RealServer{{Address: netip.MustParseAddr("10.244.0.4"), Port: 8080, Weight: 1}},
	})
	record(r, "np", nodePort)
	mustSync(t, r)
	k.Ops()
	k.IPVS.SetConnections(web, pod, 1, 0)
	record(r, "np", state("10.96.0.4", 80, "10.244.0.4:8080"))
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "delete-vs 10.0.2.15:30080/TCP")

	for _, n := range []string{"web", "dns", "empty"} {
		record(r, n, desired.State{})
	}
	mustSync(t, r)
	fakekernel.ExpectOps(t, k,
		"delete-addr 10.96.0.2", "delete-addr 10.96.0.3",
		"delete-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:80", "delete-entry KUBE-CLUSTER-IP 10.96.0.2,udp:53", "delete-entry KUBE-CLUSTER-IP 10.96.0.3,tcp:80",
		"delete-entry KUBE-IPVS-IPS 10.96.0.2", "delete-entry KUBE-IPVS-IPS 10.96.0.3",
		"delete-vs 10.96.0.2:53/UDP", "delete-vs 10.96.0.3:80/TCP",
		"update-rs 10.96.0.1:80/TCP 10.244.0.1:8080 weight=0")

	// The connection lasts: drift checks keep everything.
	mustCheck(t, r)
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k)
	if has, _ := k.Sets.Has(desired.SetIPVSIPs, ipset.Entry{IP: web.Address}); !has {
		t.Error("the draining VIP left KUBE-IPVS-IPS: the node's own ports would answer on it")
	}

	// Re-created while draining: served again, nothing deleted.
	record(r, "web", state("10.96.0.1", 80, pod.String()))
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "add-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:80", "update-rs 10.96.0.1:80/TCP 10.244.0.1:8080 weight=1")
	k.IPVS.SetConnections(web, pod, 0, 0)
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k)

	// Deleted again once the connection has ended: it all goes at once,
	// with no weight-0 leftover until a drift check.
	record(r, "web", desired.State{})
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "delete-addr 10.96.0.1", "delete-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:80", "delete-entry KUBE-IPVS-IPS 10.96.0.1",
		"delete-vs 10.96.0.1:80/TCP")
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k)
	// White-box: nothing is left draining either (no call shows it but
	// the address, which the drain would hold).
	if len(r.draining.servers) != 0 || k.Links.Dump() != "10.96.0.4" {
		t.Errorf("left draining %v, addresses %q", r.draining.servers, k.Links.Dump())
	}
}

// A Service whose port moves, or which loses endpoints, leaves no weight-0
// real server behind that carries no connection: those go at once, as
// upstream deletes them, and only those that carry connections drain. The
// decision costs one real-server dump of the virtual server concerned.
func TestOnlyWhatCarriesConnectionsDrains(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	d := dumpsOnly(k)
	pods := []string{"10.244.0.1:8080", "10.244.0.2:8080", "10.244.0.3:8080", "10.244.0.4:8080", "10.244.0.5:8080"}
	record(r, "web", state("10.96.0.1", 80, pods...))
	record(r, "api", state("10.96.0.2", 80, pods...))
	mustSync(t, r)
	k.Ops()
	d.Reset()
	web := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	api := ipvs.Key{Address: netip.MustParseAddr("10.96.0.2"), Protocol: ipvs.TCP, Port: 80}

	// web's port moves; nothing is connected to it: the old virtual server
	// goes whole, at once.
	record(r, "web", state("10.96.0.1", 81, pods...))
	mustSync(t, r)
	if got := k.IPVS.Dump(); strings.Contains(got, "10.96.0.1:80/TCP") {
		t.Errorf("the moved port's old virtual server is left:\n%s", got)
	}
	if d.of(web) != 1 {
		t.Errorf("old virtual server dumped %d times, want once", d.of(web))
	}

	// api loses three endpoints, one of which has a connection in
	// TIME_WAIT: it alone drains.
	busy := netip.MustParseAddrPort("10.244.0.5:8080")
	k.IPVS.SetConnections(api, busy, 0, 1)
	k.Ops()
	record(r, "api", state("10.96.0.2", 80, pods[:2]...))
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "delete-rs 10.96.0.2:80/TCP 10.244.0.3:8080", "delete-rs 10.96.0.2:80/TCP 10.244.0.4:8080",
		"update-rs 10.96.0.2:80/TCP 10.244.0.5:8080 weight=0")
	if d.of(api) != 1 {
		t.Errorf("api dumped %d times, want once", d.of(api))
	}
	// Its port moves too: the old virtual server drains with its one busy
	// real server, the idle ones going at once; the new one is served.
	record(r, "api", state("10.96.0.2", 81, pods[:2]...))
	mustSync(t, r)
	fakekernel.ExpectOps(t, k, "add-entry KUBE-CLUSTER-IP 10.96.0.2,tcp:81", "add-vs 10.96.0.2:81/TCP",
		"add-rs 10.96.0.2:81/TCP 10.244.0.1:8080", "add-rs 10.96.0.2:81/TCP 10.244.0.2:8080",
		"delete-entry KUBE-CLUSTER-IP 10.96.0.2,tcp:80",
		"delete-rs 10.96.0.2:80/TCP 10.244.0.1:8080", "delete-rs 10.96.0.2:80/TCP 10.244.0.2:8080")
	if d.of(api) != 2 {
		t.Errorf("api dumped %d times after two changes, want twice", d.of(api))
	}
	k.IPVS.SetConnections(api, busy, 0, 0)
	mustCheck(t, r)
	fakekernel.ExpectOps(t, k, "delete-rs 10.96.0.2:80/TCP 10.244.0.5:8080", "delete-vs 10.96.0.2:80/TCP")
}

// A Service of very many virtual servers lets them go: one sync reads at
// most drainReadsMax of them to see whether they carry connections; the
// rest drain, and a drift check deletes them once it sees none.
func TestDrainReadsAreBoundedPerSync(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	d := dumpsOnly(k)
	var big desired.State
	for port := range uint16(drainReadsMax + 6) {
		st := state("10.96.0.1", 1000+port, "10.244.0.1:8080")
		big.VirtualServers = append(big.VirtualServers, st.VirtualServers...)
		big.Entries = append(big.Entries, st.Entries[0])
	}
	big.Addresses = []netip.Addr{netip.MustParseAddr("10.96.0.1")}
	big.Entries = append(big.Entries, desired.SetEntry{Set: desired.SetIPVSIPs, Entry: ipset.Entry{IP: big.Addresses[0]}})
	record(r, "big", big)
	mustSync(t, r)
	d.Reset()

	r.Record([]Change{{Name: testobj.Name("big")}}) // deleted
	r.Sync(nil, nil)
	dumps := 0
	for _, n := range d.Named("list-rs") {
		dumps += n
	}
	if dumps > drainReadsMax {
		t.Errorf("%d real-server dumps in one sync, want at most %d", dumps, drainReadsMax)
	}
	if left := strings.Count(k.IPVS.Dump(), "-A "); left == 0 || left > 6 {
		t.Errorf("%d virtual servers left to drain, want the few past the budget", left)
	}

	mustCheck(t, r)
	if got := k.IPVS.Dump(); got != "" {
		t.Errorf("the drift check did not delete what drained:\n%s", got)
	}
}
