package proxier

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

const savedWithOurs = `*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A POSTROUTING -j KUBE-KUBELET-CANARY
-A KUBE-SERVICES -j KUBE-POSTROUTING
COMMIT
*mangle
:KUBE-SERVICES - [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
-A INPUT -j ACCEPT
COMMIT
`

func TestCleanupPayloadTakesOnlyOurChains(t *testing.T) {
	got := string(cleanupPayload(savedWithOurs))
	want := `*nat
-D PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-D POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
:KUBE-POSTROUTING - [0:0]
:KUBE-SERVICES - [0:0]
-X KUBE-POSTROUTING
-X KUBE-SERVICES
COMMIT
`
	if got != want {
		t.Errorf("payload:\n%s\nwant:\n%s", got, want)
	}
	if p := cleanupPayload("*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n"); p != nil {
		t.Errorf("nothing of ours, yet a payload:\n%s", p)
	}
}

type recorder struct{ calls []string }

func (r *recorder) DeleteLink() error        { r.calls = append(r.calls, "delete-link"); return nil }
func (r *recorder) Destroy(set string) error { r.calls = append(r.calls, "destroy "+set); return nil }

func TestCleanupKeepsExcludedVirtualServers(t *testing.T) {
	v := ipvs.NewFake()
	ours := ipvs.VirtualServer{Key: ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 443}, Scheduler: "rr"}
	theirs := ipvs.VirtualServer{Key: ipvs.Key{Address: netip.MustParseAddr("10.250.99.1"), Protocol: ipvs.TCP, Port: 22}, Scheduler: "rr"}
	_ = v.AddVirtualServer(ours)
	_ = v.AddVirtualServer(theirs)
	v.TakeOps()
	r := &recorder{}
	routes := dummyiface.NewFake()
	_ = routes.SetLocalRoutes([]netip.Prefix{netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")})
	if err := Cleanup(CleanupKernel{IPVS: v, Link: r, Routes: routes, Sets: r}, []netip.Prefix{netip.MustParsePrefix("10.250.99.0/24")}); err != nil {
		t.Fatal(err)
	}
	if left, _ := routes.LocalRoutes(); len(left) > 0 {
		t.Errorf("local routes left: %v", left)
	}
	if ops := v.TakeOps(); !slices.Equal(ops, []string{"delete-vs 10.96.0.1:443/TCP"}) {
		t.Errorf("IPVS writes %v", ops)
	}
	if r.calls[0] != "delete-link" || !slices.Contains(r.calls, "destroy KUBE-CLUSTER-IP") || !slices.Contains(r.calls, "destroy KUBE-6-CLUSTER-IP") {
		t.Errorf("calls %v", r.calls)
	}
	if strings.Contains(v.Dump(), "10.96.0.1") {
		t.Error("our virtual server is left")
	}
}

// afterRollback is a node back on kube-proxy's iptables mode: its rules
// are in the chains it shares with us by name, ours are still there.
const afterRollback = `*nat
:PREROUTING ACCEPT [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-ABC - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-ABC
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
COMMIT
*filter
:INPUT ACCEPT [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
COMMIT
`

func TestCleanupLeavesIPTablesModeItsChains(t *testing.T) {
	got := string(cleanupPayload(afterRollback))
	want := `*nat
-D KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
:KUBE-LOAD-BALANCER - [0:0]
-X KUBE-LOAD-BALANCER
COMMIT
*filter
-D INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-D INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
:KUBE-IPVS-FILTER - [0:0]
-X KUBE-IPVS-FILTER
COMMIT
`
	if got != want {
		t.Errorf("payload:\n%s\nwant:\n%s", got, want)
	}
}

// A bare "-A " line, which iptables-save never writes, is passed over
// where iptables mode runs too, not a panic in --cleanup.
func TestCleanupPassesOverABareAppendLine(t *testing.T) {
	got := string(cleanupPayload("*nat\n:KUBE-SVC-ABC - [0:0]\n:KUBE-LOAD-BALANCER - [0:0]\n-A \nCOMMIT\n"))
	if !strings.Contains(got, "-X KUBE-LOAD-BALANCER") {
		t.Errorf("payload:\n%s\nwant KUBE-LOAD-BALANCER removed", got)
	}
}

type clearedFlows [][]conntrack.Stale

func (c *clearedFlows) Clear(stale []conntrack.Stale) (int, error) {
	*c = append(*c, stale)
	return len(stale), nil
}

// TestCleanupForgetsUDPFlowsToRemovedVirtualServers: the UDP flows to the
// virtual servers it removes are forgotten, so that a client's next
// datagram meets the NAT rules of whoever runs next; other flows stay.
func TestCleanupForgetsUDPFlowsToRemovedVirtualServers(t *testing.T) {
	v := ipvs.NewFake()
	key := func(ip string, proto ipvs.Protocol, port uint16) ipvs.Key {
		return ipvs.Key{Address: netip.MustParseAddr(ip), Protocol: proto, Port: port}
	}
	for _, k := range []ipvs.Key{key("10.96.0.10", ipvs.UDP, 53), key("10.96.0.10", ipvs.TCP, 53),
		key("fd00::10", ipvs.UDP, 53), key("10.250.99.1", ipvs.UDP, 53)} {
		_ = v.AddVirtualServer(ipvs.VirtualServer{Key: k, Scheduler: "rr"})
	}
	var cleared clearedFlows
	if err := Cleanup(CleanupKernel{IPVS: v, Conntrack: &cleared}, []netip.Prefix{netip.MustParsePrefix("10.250.99.0/24")}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, pass := range cleared {
		var vips []string
		for _, s := range pass {
			vips = append(vips, s.VIP.String())
			if len(s.Keep) != 0 {
				t.Errorf("flows to %s keep replies from %v; want none kept", s.VIP, s.Keep)
			}
		}
		got = append(got, strings.Join(vips, ","))
	}
	slices.Sort(got)
	if want := []string{"10.96.0.10:53", "[fd00::10]:53"}; !slices.Equal(got, want) {
		t.Errorf("flows forgotten, a pass per family: %q; want %q", got, want)
	}
}
