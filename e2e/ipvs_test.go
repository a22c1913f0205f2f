//go:build e2e

package e2e

import (
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// inNetns makes a network namespace the test has to itself (the shared
// proxier owns the root namespace's tables) and runs open in it: netlink
// sockets stay in the namespace they were made in.
func inNetns(t *testing.T, name string, open func()) {
	t.Helper()
	if _, err := framework.Output("ip", "netns", "add", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = framework.Output("ip", "netns", "del", name) })
	// The kernel refuses real servers (EINVAL) in a namespace without a
	// local routing table, which lo being up creates.
	if _, err := framework.Output("ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	root, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := netns.Set(ns); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = netns.Set(root) }()
	open()
}

// ipvsIn opens the IPVS table of a new network namespace.
func ipvsIn(t *testing.T, name string) *ipvs.Netlink {
	t.Helper()
	var h *ipvs.Netlink
	var err error
	inNetns(t, name, func() { h, err = ipvs.NewNetlink() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// TestIPVSReadsWhatItWrites writes virtual and real servers through our
// encoder and reads them back through our decoder and through ipvsadm.
func TestIPVSReadsWhatItWrites(t *testing.T) {
	t.Parallel()
	h := ipvsIn(t, "kip-ipvs-roundtrip")
	web := ipvs.VirtualServer{Key: ipvs.Key{Address: mustAddr("10.96.7.1"), Protocol: ipvs.TCP, Port: 80}, Scheduler: "rr"}
	dns := ipvs.VirtualServer{Key: ipvs.Key{Address: mustAddr("10.96.7.2"), Protocol: ipvs.UDP, Port: 53},
		Scheduler: "sh", Flags: ipvs.FlagPersistent | ipvs.FlagSchedFallback, Timeout: 10800}
	reals := []ipvs.RealServer{{Address: mustAddr("10.244.7.1"), Port: 8080, Weight: 1}, {Address: mustAddr("10.244.7.2"), Port: 8080, Weight: 0}}
	ops := []ipvs.Op{{Kind: ipvs.AddVS, VS: web}, {Kind: ipvs.AddVS, VS: dns}}
	for _, r := range reals {
		ops = append(ops, ipvs.Op{Kind: ipvs.AddRS, VS: web, RS: r})
	}
	for _, err := range h.Write(ops) {
		if err != nil {
			t.Fatal(err)
		}
	}

	list, err := h.VirtualServers()
	if err != nil || len(list) != 2 || !slices.Contains(list, web) || !slices.Contains(list, dns) {
		t.Fatalf("VirtualServers = %+v, %v; want %+v and %+v", list, err, web, dns)
	}
	if got, ok, err := h.GetVirtualServer(dns.Key); err != nil || !ok || got != dns {
		t.Fatalf("GetVirtualServer(%s) = %+v, %v, %v", dns.Key, got, ok, err)
	}
	missing := ipvs.Key{Address: mustAddr("10.96.7.3"), Protocol: ipvs.TCP, Port: 80}
	if _, ok, err := h.GetVirtualServer(missing); err != nil || ok {
		t.Fatalf("GetVirtualServer(missing) = %v, %v; want not found, no error", ok, err)
	}
	got, err := h.RealServers(web.Key)
	if err != nil || len(got) != 2 || !slices.Contains(got, reals[0]) || !slices.Contains(got, reals[1]) {
		t.Fatalf("RealServers = %+v, %v; want %+v", got, err, reals)
	}
	if got, err := h.RealServers(missing); err != nil || len(got) != 0 {
		t.Fatalf("RealServers(missing) = %+v, %v; want none, no error", got, err)
	}
	// The one-read table is the namespace's too, not the process's, whose
	// table the shared proxier fills.
	table, err := h.AllRealServers()
	if err != nil || len(table) != 2 || len(table[dns.Key]) != 0 || len(table[web.Key]) != 2 ||
		!slices.Contains(table[web.Key], reals[0]) || !slices.Contains(table[web.Key], reals[1]) {
		t.Fatalf("AllRealServers = %+v, %v; want %+v for %s and none for %s", table, err, reals, web.Key, dns.Key)
	}

	// ipvsadm, an independent reader, sees the same table.
	saved, err := framework.Output("ip", "netns", "exec", "kip-ipvs-roundtrip", "ipvsadm", "-Sn")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"-A -t 10.96.7.1:80 -s rr",
		"-a -t 10.96.7.1:80 -r 10.244.7.1:8080 -m -w 1",
		"-a -t 10.96.7.1:80 -r 10.244.7.2:8080 -m -w 0",
		"-A -u 10.96.7.2:53 -s sh -p 10800 -b sh-fallback",
	} {
		if !strings.Contains(saved, line+"\n") {
			t.Errorf("ipvsadm -Sn lacks %q:\n%s", line, saved)
		}
	}
}

// A virtual server's real servers take many rounds of a dump read a page
// at a time (nlbatch.Conn.SmallReads); the drift check's list and the
// statistics still hold every one.
func TestIPVSReadsABigVirtualServerWhole(t *testing.T) {
	t.Parallel()
	h := ipvsIn(t, "kip-ipvs-big")
	vs := ipvs.VirtualServer{Key: ipvs.Key{Address: mustAddr("fd00:96::1"), Protocol: ipvs.TCP, Port: 443}, Scheduler: "rr"}
	ops := []ipvs.Op{{Kind: ipvs.AddVS, VS: vs}}
	const n = 400 // ~60 KiB of real server messages
	for i := 0; i < n; i++ {
		rs := ipvs.RealServer{Address: netip.AddrFrom16([16]byte{0xfd, 0, 0x2, 0x44, 14: byte(i >> 8), 15: byte(i)}), Port: 8443, Weight: 1}
		ops = append(ops, ipvs.Op{Kind: ipvs.AddRS, VS: vs, RS: rs})
	}
	for _, err := range h.Write(ops) {
		if err != nil {
			t.Fatal(err)
		}
	}
	reals, err := h.RealServers(vs.Key)
	if err != nil || len(reals) != n {
		t.Fatalf("RealServers: %d, %v; want %d", len(reals), err, n)
	}
	stats, err := h.Stats()
	if err != nil || len(stats) != 1 || len(stats[0].Reals) != n {
		t.Fatalf("Stats: %+v, %v; want one virtual server with %d real servers", stats, err, n)
	}
	for i, rs := range stats[0].Reals {
		if rs.ID != reals[i].ID() {
			t.Fatalf("Stats' real server %d is %s, the list's %s", i, rs.ID, reals[i].ID())
		}
	}
}
