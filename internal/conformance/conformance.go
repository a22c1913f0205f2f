// Package conformance is the behaviour every implementation of a kernel
// table shares, the fakes and the netlink code alike: each function runs
// the same cases against one implementation. The unit tests run them
// against the fakes, and the VM tests (e2e/conformance_test.go) against
// the kernel, in a network namespace of their own: the fakes' "kernel
// semantics" are checked there, not claimed.
//
// Each function expects an empty table of its kind.
package conformance

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// IPVS checks virtual and real servers: what is written reads back, a
// write the table cannot take fails alone (Unconfirmed, as the reconciler
// reads it), and a missing virtual server has no real servers.
func IPVS(t *testing.T, v ipvs.Interface) {
	t.Helper()
	a := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	b := ipvs.Key{Address: netip.MustParseAddr("fd00::1"), Protocol: ipvs.UDP, Port: 53}
	missing := ipvs.Key{Address: netip.MustParseAddr("10.96.0.99"), Protocol: ipvs.TCP, Port: 80}
	vsA := ipvs.VirtualServer{Key: a, Scheduler: "rr"}
	vsB := ipvs.VirtualServer{Key: b, Scheduler: "rr", Flags: ipvs.FlagPersistent, Timeout: 10800}
	rs1 := ipvs.RealServer{Address: netip.MustParseAddr("10.244.0.1"), Port: 8080, Weight: 1}
	rs2 := ipvs.RealServer{Address: netip.MustParseAddr("10.244.0.2"), Port: 8080, Weight: 1}
	rs6 := ipvs.RealServer{Address: netip.MustParseAddr("fd00:244::1"), Port: 5353, Weight: 1}

	// One batch: each op's result is its own, and a failing op stops
	// none after it.
	errs := v.Write([]ipvs.Op{
		{Kind: ipvs.AddVS, VS: vsA},
		{Kind: ipvs.AddVS, VS: vsA}, // exists
		{Kind: ipvs.AddRS, VS: vsA, RS: rs1},
		{Kind: ipvs.AddRS, VS: ipvs.VirtualServer{Key: missing}, RS: rs1}, // no such virtual server
		{Kind: ipvs.AddVS, VS: vsB},
		{Kind: ipvs.AddRS, VS: vsB, RS: rs6},
		{Kind: ipvs.AddRS, VS: vsA, RS: rs2},
		{Kind: ipvs.AddRS, VS: vsA, RS: rs2}, // exists
	})
	for i, want := range []bool{true, false, true, false, true, true, true, false} {
		if got := errs[i] == nil; got != want {
			t.Errorf("batch op %d: error %v, want success %v", i, errs[i], want)
		}
	}
	op := func(kind ipvs.OpKind, vs ipvs.VirtualServer, rs ipvs.RealServer) ipvs.Op {
		return ipvs.Op{Kind: kind, VS: vs, RS: rs}
	}
	if !ipvs.Unconfirmed(op(ipvs.AddVS, vsA, ipvs.RealServer{}), errs[1]) || !ipvs.Unconfirmed(op(ipvs.AddRS, vsA, rs2), errs[7]) {
		t.Errorf("adding what exists: %v, %v; want errors the reconciler reads back (Unconfirmed)", errs[1], errs[7])
	}
	if ipvs.Unconfirmed(op(ipvs.AddRS, ipvs.VirtualServer{Key: missing}, rs1), errs[3]) {
		t.Errorf("adding a real server to a missing virtual server: %v, want a refusal", errs[3])
	}

	list, err := v.VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list, func(x, y ipvs.VirtualServer) int { return x.Key.Address.Compare(y.Key.Address) })
	if len(list) != 2 || !sameVS(list[0], vsA) || !sameVS(list[1], vsB) {
		t.Errorf("virtual servers %+v, want %+v and %+v", list, vsA, vsB)
	}
	if got, ok, err := v.GetVirtualServer(b); err != nil || !ok || !sameVS(got, vsB) {
		t.Errorf("get %s: %+v, %v, %v", b, got, ok, err)
	}
	if _, ok, err := v.GetVirtualServer(missing); err != nil || ok {
		t.Errorf("get missing %s: found %v, error %v; want neither", missing, ok, err)
	}
	expectReals(t, v, a, rs1, rs2)
	expectReals(t, v, b, rs6)
	if reals, err := v.RealServers(missing); err != nil || len(reals) != 0 {
		t.Errorf("real servers of a missing virtual server: %v, %v; want none and no error", reals, err)
	}

	// Updates take; deletes of what is gone fail as Unconfirmed.
	vsA.Scheduler = "wlc"
	rs1.Weight = 0
	errs = v.Write([]ipvs.Op{
		{Kind: ipvs.UpdateVS, VS: vsA},
		{Kind: ipvs.UpdateRS, VS: vsA, RS: rs1},
		{Kind: ipvs.DeleteRS, VS: vsA, RS: rs2},
		{Kind: ipvs.DeleteRS, VS: vsA, RS: rs2}, // gone
		{Kind: ipvs.UpdateVS, VS: ipvs.VirtualServer{Key: missing, Scheduler: "rr"}},
	})
	for i, want := range []bool{true, true, true, false, false} {
		if got := errs[i] == nil; got != want {
			t.Errorf("update batch op %d: error %v, want success %v", i, errs[i], want)
		}
	}
	if !ipvs.Unconfirmed(op(ipvs.DeleteRS, vsA, rs2), errs[3]) {
		t.Errorf("deleting a missing real server: %v, want an error the reconciler reads back", errs[3])
	}
	if got, _, _ := v.GetVirtualServer(a); got.Scheduler != "wlc" {
		t.Errorf("scheduler after update: %q", got.Scheduler)
	}
	expectReals(t, v, a, rs1)
	if tr, ok := v.(ipvs.TableReader); ok {
		table, err := tr.AllRealServers()
		if err != nil || !sameReals(table[a], []ipvs.RealServer{rs1}) || !sameReals(table[b], []ipvs.RealServer{rs6}) {
			t.Errorf("table read %v, %v; want what the dumps say", table, err)
		}
	}

	// A virtual server's real servers go with it.
	errs = v.Write([]ipvs.Op{{Kind: ipvs.DeleteVS, VS: vsA}, {Kind: ipvs.DeleteVS, VS: vsB}, {Kind: ipvs.DeleteVS, VS: vsB}})
	if errs[0] != nil || errs[1] != nil || !ipvs.Unconfirmed(op(ipvs.DeleteVS, vsB, ipvs.RealServer{}), errs[2]) {
		t.Errorf("deletes: %v", errs)
	}
	if list, err := v.VirtualServers(); err != nil || len(list) != 0 {
		t.Errorf("after deleting both: %v, %v", list, err)
	}
	if reals, err := v.RealServers(a); err != nil || len(reals) != 0 {
		t.Errorf("real servers of a deleted virtual server: %v, %v", reals, err)
	}
}

func sameVS(a, b ipvs.VirtualServer) bool {
	return a.Key == b.Key && a.Scheduler == b.Scheduler && a.Flags == b.Flags && a.Timeout == b.Timeout
}

func expectReals(t *testing.T, v ipvs.Interface, k ipvs.Key, want ...ipvs.RealServer) {
	t.Helper()
	got, err := v.RealServers(k)
	if err != nil || !sameReals(got, want) {
		t.Errorf("real servers of %s: %+v, %v; want %+v", k, got, err, want)
	}
}

// sameReals compares real servers by address, port and weight.
func sameReals(got, want []ipvs.RealServer) bool {
	key := func(r ipvs.RealServer) string { return r.ID().String() + "/" + string(rune('0'+r.Weight)) }
	g, w := make([]string, len(got)), make([]string, len(want))
	for i, r := range got {
		g[i] = key(r)
	}
	for i, r := range want {
		w[i] = key(r)
	}
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

// Sets checks ipsets: entries of each type read back, adding a present
// entry and deleting a missing one are no errors, a full set refuses more
// until it grows, and a missing set is an error.
func Sets(t *testing.T, s ipset.Interface) {
	t.Helper()
	ports := ipset.Set{Name: "KIP-TEST-PORTS", Type: ipset.HashIPPort, Family: "inet", HashSize: 64, MaxElem: 2}
	ips := ipset.Set{Name: "KIP-TEST-IPS6", Type: ipset.HashIP, Family: "inet6", HashSize: 64, MaxElem: 16}
	for _, set := range []ipset.Set{ports, ips, ports} { // twice: an existing set is kept
		if err := s.EnsureSet(set); err != nil {
			t.Fatalf("ensure %s: %v", set.Name, err)
		}
	}
	e1 := ipset.Entry{IP: netip.MustParseAddr("10.96.0.1"), Protocol: ipset.EntryTCP, Port: 80}
	e2 := ipset.Entry{IP: netip.MustParseAddr("10.96.0.2"), Protocol: ipset.EntryUDP, Port: 53}
	e3 := ipset.Entry{IP: netip.MustParseAddr("10.96.0.3"), Protocol: ipset.EntryTCP, Port: 443}
	if errs := s.AddEntries(ports.Name, []ipset.Entry{e1, e2, e1}); firstError(errs) != nil {
		t.Errorf("add, the last one present: %v", errs)
	}
	if errs := s.AddEntries(ports.Name, []ipset.Entry{e3}); errs[0] == nil {
		t.Error("a full set took another entry")
	}
	if n, err := s.Count(ports.Name); err != nil || n != 2 {
		t.Errorf("count %d, %v; want 2", n, err)
	}
	if c, err := s.Capacity(ports.Name); err != nil || c != 2 {
		t.Errorf("capacity %d, %v; want 2", c, err)
	}
	if err := s.Grow(ports, 4); err != nil {
		t.Fatalf("grow: %v", err)
	}
	if errs := s.AddEntries(ports.Name, []ipset.Entry{e3}); errs[0] != nil {
		t.Errorf("add after growing: %v", errs[0])
	}
	if c, err := s.Capacity(ports.Name); err != nil || c != 4 {
		t.Errorf("capacity after growing %d, %v; want 4", c, err)
	}
	expectEntries(t, s, ports.Name, e1, e2, e3)
	if has, err := s.Has(ports.Name, e2); err != nil || !has {
		t.Errorf("has %s: %v, %v", e2, has, err)
	}
	if errs := s.DeleteEntries(ports.Name, []ipset.Entry{e2, e2}); firstError(errs) != nil {
		t.Errorf("delete, the second one missing: %v", errs)
	}
	if has, err := s.Has(ports.Name, e2); err != nil || has {
		t.Errorf("has %s after delete: %v, %v", e2, has, err)
	}
	expectEntries(t, s, ports.Name, e1, e3)

	v6 := ipset.Entry{IP: netip.MustParseAddr("fd00::10")}
	if errs := s.AddEntries(ips.Name, []ipset.Entry{v6}); errs[0] != nil {
		t.Errorf("add %s: %v", v6, errs[0])
	}
	expectEntries(t, s, ips.Name, v6)

	// A missing set is told apart from a set that could not be read.
	const none = "KIP-TEST-NONE"
	if _, err := s.Entries(none); !errors.Is(err, ipset.ErrNoSet) {
		t.Errorf("listing a missing set: %v, want ErrNoSet", err)
	}
	if _, err := s.Count(none); !errors.Is(err, ipset.ErrNoSet) {
		t.Errorf("counting a missing set: %v, want ErrNoSet", err)
	}
	if _, err := s.Has(none, e1); !errors.Is(err, ipset.ErrNoSet) {
		t.Errorf("testing an entry of a missing set: %v, want ErrNoSet", err)
	}
	if errs := s.AddEntries(none, []ipset.Entry{e1}); !errors.Is(errs[0], ipset.ErrNoSet) {
		t.Errorf("adding to a missing set: %v, want ErrNoSet", errs[0])
	}
}

func expectEntries(t *testing.T, s ipset.Interface, set string, want ...ipset.Entry) {
	t.Helper()
	got, err := s.Entries(set)
	str := func(es []ipset.Entry) []string {
		out := make([]string, len(es))
		for i, e := range es {
			out[i] = e.String()
		}
		slices.Sort(out)
		return out
	}
	if err != nil || !slices.Equal(str(got), str(want)) {
		t.Errorf("entries of %s: %v, %v; want %v", set, str(got), err, str(want))
	}
}

// NoLink checks a link no one made: it does not exist and has no address,
// and reading it does not make it.
func NoLink(t *testing.T, l dummyiface.Interface) {
	t.Helper()
	expectAddrs(t, l)
	if ok, err := l.Exists(); ok || err != nil {
		t.Fatalf("a link no one made exists: %v, %v", ok, err)
	}
}

// Links checks the dummy link's addresses: adding one bound, or deleting
// one unbound, is done already, not an error.
func Links(t *testing.T, l dummyiface.Interface) {
	t.Helper()
	if err := l.EnsureLink(); err != nil {
		t.Fatal(err)
	}
	if ok, err := l.Exists(); !ok || err != nil {
		t.Fatalf("the link made does not exist: %v, %v", ok, err)
	}
	if err := l.EnsureLink(); err != nil {
		t.Fatalf("a second EnsureLink: %v", err)
	}
	a, b := netip.MustParseAddr("10.96.0.1"), netip.MustParseAddr("fd00::1")
	if errs := l.AddAddresses([]netip.Addr{a, b}); firstError(errs) != nil {
		t.Fatalf("add: %v", errs)
	}
	expectAddrs(t, l, a, b)
	errs := l.AddAddresses([]netip.Addr{a})
	errs = append(errs, l.DeleteAddresses([]netip.Addr{b, b})...)
	if firstError(errs) != nil {
		t.Errorf("add of a bound address, delete, delete of an unbound one: %v", errs)
	}
	expectAddrs(t, l, a)
}

func expectAddrs(t *testing.T, l dummyiface.Interface, want ...netip.Addr) {
	t.Helper()
	got, err := l.Addresses()
	slices.SortFunc(got, netip.Addr.Compare)
	slices.SortFunc(want, netip.Addr.Compare)
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("addresses %v, %v; want %v", got, err, want)
	}
}

func firstError(errs []error) error { return errors.Join(errs...) }

// IPTables checks iptables-restore as the glue uses it (no flush of
// chains the payload does not declare) and iptables-save's listing of
// it: rules read back in order, a declared chain is flushed, and a payload
// that cannot apply whole (a rule to delete that is not there, a chain
// that does not exist) fails and changes nothing.
func IPTables(t *testing.T, ipt iptables.Interface) {
	t.Helper()
	restore := func(lines ...string) error {
		return ipt.Restore([]byte("*filter\n" + strings.Join(lines, "\n") + "\nCOMMIT\n"))
	}
	expect := func(what string, want ...string) {
		t.Helper()
		saved, err := ipt.Save()
		if err != nil {
			t.Fatalf("%s: save: %v", what, err)
		}
		var got []string
		for _, l := range strings.Split(string(saved), "\n") {
			if strings.HasPrefix(l, "-A KIP-TEST ") {
				got = append(got, l)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: rules\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	if err := restore(":KIP-TEST - [0:0]", "-A KIP-TEST -s 10.0.0.1/32 -j ACCEPT", "-A KIP-TEST -s 10.0.0.2/32 -j DROP"); err != nil {
		t.Fatal(err)
	}
	expect("declared with two rules", "-A KIP-TEST -s 10.0.0.1/32 -j ACCEPT", "-A KIP-TEST -s 10.0.0.2/32 -j DROP")
	if err := restore("-I KIP-TEST 1 -s 10.0.0.3/32 -j ACCEPT", "-D KIP-TEST -s 10.0.0.1/32 -j ACCEPT"); err != nil {
		t.Fatal(err)
	}
	expect("edited in place", "-A KIP-TEST -s 10.0.0.3/32 -j ACCEPT", "-A KIP-TEST -s 10.0.0.2/32 -j DROP")
	if err := restore("-A KIP-TEST -s 10.0.0.4/32 -j ACCEPT", "-D KIP-TEST -s 10.0.0.1/32 -j ACCEPT"); err == nil {
		t.Error("deleting a rule that is not there: no error")
	}
	expect("after a failed payload", "-A KIP-TEST -s 10.0.0.3/32 -j ACCEPT", "-A KIP-TEST -s 10.0.0.2/32 -j DROP")
	if err := restore("-A KIP-TEST-NONE -s 10.0.0.5/32 -j ACCEPT"); err == nil {
		t.Error("appending to a chain that does not exist: no error")
	}
	if err := restore(":KIP-TEST - [0:0]", "-A KIP-TEST -s 10.0.0.6/32 -j ACCEPT"); err != nil {
		t.Fatal(err)
	}
	expect("declared again", "-A KIP-TEST -s 10.0.0.6/32 -j ACCEPT")
}
