//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestUDPFlowLeavesRemovedPod: a client that keeps its UDP source port (a
// resolver) talks to a Service's pod; the pod is replaced. The conntrack
// entry answered by the removed pod is gone once its real server is, and
// the client's very next datagram is answered by the new pod. The proxier
// deletes such entries over netlink; kernels since 5.9 also do so
// themselves (expire_nodest_conn with IPVS conntrack), so on the VM's
// kernel this shows the behaviour, and the unit tests show the proxier's
// part.
func TestUDPFlowLeavesRemovedPod(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "udpflow"
	mustNamespace(t, ns)
	a, b := mustPod(t, "ct-a", "10.244.34.1", true), mustPod(t, "ct-b", "10.244.34.2", true)
	client := mustPod(t, "ct-client", "10.244.34.3", false)
	vip := ap("10.96.34.10:53")
	ports := []discovery.EndpointPort{framework.SlicePort("dns", v1.ProtocolUDP, 5353)}
	svc := framework.ClusterIPService(ns, "dns", vip.Addr().String(), framework.Port("dns", v1.ProtocolUDP, 53, 5353))
	mustApply(t, svc, framework.Slice(ns, "dns", "dns-1", ports, framework.Endpoint(a.IP.String(), framework.NodeName, true)))

	conn, err := client.UDPSocket(vip)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	eventually(t, "the flow answered by ct-a", 30*time.Second, func() error {
		if got, err := framework.Ask(conn, time.Second); err != nil || got != "ct-a" {
			return fmt.Errorf("answer %q, %v", got, err)
		}
		return nil
	})
	fromA := netip.AddrPortFrom(a.IP, 5353)
	if n := flowsAnsweredBy(t, vip, fromA); n != 1 {
		t.Fatalf("%d conntrack entries for %v answered by %v, want 1", n, vip, fromA)
	}

	mustApply(t, framework.Slice(ns, "dns", "dns-1", ports, framework.Endpoint(b.IP.String(), framework.NodeName, true)))
	key := ipvs.Key{Address: vip.Addr(), Protocol: ipvs.UDP, Port: vip.Port()}
	want := netip.AddrPortFrom(b.IP, 5353).String() + "/1"
	eventually(t, "ct-b the only real server", 30*time.Second, func() error {
		rs, err := realServers(t, key)
		if err != nil || len(rs) != 1 || rs[0] != want {
			return fmt.Errorf("real servers %v, %v", rs, err)
		}
		return nil
	})
	// The proxier clears the entries right after the real server's delete,
	// in the same sync; no datagram is sent meanwhile, so the kernel's own
	// expiry (which acts on a packet's arrival) plays no part.
	eventually(t, "no conntrack entry answered by the removed pod", 5*time.Second, func() error {
		if n := flowsAnsweredBy(t, vip, fromA); n != 0 {
			return fmt.Errorf("%d conntrack entries still answered by the removed pod", n)
		}
		return nil
	})
	if got, err := framework.Ask(conn, 2*time.Second); err != nil || got != "ct-b" {
		t.Errorf("the flow's next datagram got %q, %v; want ct-b", got, err)
	}
}

// flowsAnsweredBy counts the UDP conntrack entries to vip whose replies
// come from src.
func flowsAnsweredBy(t *testing.T, vip, src netip.AddrPort) int {
	t.Helper()
	flows, err := netlink.ConntrackTableList(netlink.ConntrackTable, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range flows {
		dst, _ := netip.AddrFromSlice(f.Forward.DstIP)
		from, _ := netip.AddrFromSlice(f.Reverse.SrcIP)
		if f.Forward.Protocol == unix.IPPROTO_UDP && netip.AddrPortFrom(dst.Unmap(), f.Forward.DstPort) == vip &&
			netip.AddrPortFrom(from.Unmap(), f.Reverse.SrcPort) == src {
			n++
		}
	}
	return n
}

// TestConntrackClearInTheKernel: conntrack.Netlink deletes, in the real
// table, the UDP entries to a VIP answered by a real server it is not told
// to keep, and no other entry.
func TestConntrackClearInTheKernel(t *testing.T) {
	t.Parallel()
	vip := ap("10.96.34.20:53")
	gone, kept := ap("10.244.34.21:5353"), ap("10.244.34.22:5353")
	other := ap("10.96.34.21:53")
	entry := func(client, dst, from netip.AddrPort) *netlink.ConntrackFlow {
		f := &netlink.ConntrackFlow{FamilyType: unix.AF_INET, TimeOut: 60}
		f.Forward = netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: client.Addr().AsSlice(), SrcPort: client.Port(),
			DstIP: dst.Addr().AsSlice(), DstPort: dst.Port()}
		f.Reverse = netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: from.Addr().AsSlice(), SrcPort: from.Port(),
			DstIP: client.Addr().AsSlice(), DstPort: client.Port()}
		return f
	}
	for _, f := range []*netlink.ConntrackFlow{
		entry(ap("10.244.34.30:40001"), vip, gone),
		entry(ap("10.244.34.30:40002"), vip, kept),
		entry(ap("10.244.34.30:40003"), other, gone),
	} {
		if err := netlink.ConntrackCreate(netlink.ConntrackTable, unix.AF_INET, f); err != nil {
			t.Fatalf("create conntrack entry: %v", err)
		}
	}
	n, err := conntrack.Netlink{}.Clear([]conntrack.Stale{{VIP: vip, Keep: []netip.AddrPort{kept}}})
	if err != nil || n != 1 {
		t.Fatalf("Clear deleted %d entries (%v), want 1", n, err)
	}
	for _, c := range []struct {
		vip, from netip.AddrPort
		want      int
	}{{vip, gone, 0}, {vip, kept, 1}, {other, gone, 1}} {
		if got := flowsAnsweredBy(t, c.vip, c.from); got != c.want {
			t.Errorf("entries to %v answered by %v: %d, want %d", c.vip, c.from, got, c.want)
		}
	}
}
