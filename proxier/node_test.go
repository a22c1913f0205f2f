package proxier

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nodeaddrs"
)

// TestNodePortsFollowTheNodeAddresses: a NodePort Service is served on the
// node's addresses as a drift check finds them, its port is in the TCP
// bitmap, and the chains match on that set only while it has entries.
func TestNodePortsFollowTheNodeAddresses(t *testing.T) {
	k := fakekernel.Bare()
	ipt := &iptables.Fake{}
	addrs := &nodeaddrs.Fake{}
	a, b := netip.MustParseAddr("10.0.2.15"), netip.MustParseAddr("192.168.7.1")
	addrs.Set(nil, a, netip.MustParseAddr("fd00::15"))
	p := New(Config{Desired: desired.Config{NodeName: "me"}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour},
		Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: ipt, NodeAddrs: addrs},
		zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
	web := testobj.Service("10.96.0.10", v1.ServicePort{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080})
	web.Spec.Type = v1.ServiceTypeNodePort
	plain := testobj.Service("10.96.0.11", testobj.Port("", v1.ProtocolTCP, 80))
	plain.Name = "plain"
	p.OnServiceAdd(desired.ServiceOf(web))
	p.OnServiceAdd(desired.ServiceOf(plain))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()

	virtualServers := func() []string {
		var out []string
		for _, l := range strings.Split(k.IPVS.Dump(), "\n") {
			if strings.HasPrefix(l, "-A ") {
				out = append(out, strings.Fields(l)[1])
			}
		}
		slices.Sort(out)
		return out
	}
	nodePortRule := func() bool {
		saved, _ := ipt.Save()
		return strings.Contains(string(saved), "--match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ")
	}
	if got, want := virtualServers(), []string{"10.0.2.15:30080/TCP", "10.96.0.10:80/TCP", "10.96.0.11:80/TCP"}; !slices.Equal(got, want) {
		t.Fatalf("virtual servers %v, want %v (IPv6 addresses wait for dual-stack)", got, want)
	}
	if !strings.Contains(k.Sets.Dump(), "add KUBE-NODE-PORT-TCP 30080") || !nodePortRule() {
		t.Fatalf("node port not in its set or chain:\n%s", k.Sets.Dump())
	}
	k.Ops()

	// An address appears: at the next drift check, the NodePort Service
	// alone is recomputed and gets a virtual server there.
	addrs.Set(nil, a, b)
	p.drift.needFull = true
	p.SyncNow()
	fakekernel.ExpectOps(t, k, "add-vs 192.168.7.1:30080/TCP")
	addrs.Set(nil, b)
	p.drift.needFull = true
	p.SyncNow()
	fakekernel.ExpectOps(t, k, "delete-vs 10.0.2.15:30080/TCP")

	// A failed listing keeps the addresses in use.
	addrs.Set(errors.New("netlink: no buffer space"))
	p.drift.needFull = true
	p.SyncNow()
	fakekernel.ExpectOps(t, k)

	// --nodeport-addresses primary: the Node's InternalIP alone.
	p.cfg.NodePortPrimary = true
	addrs.Set(nil, a, b)
	p.OnNodeChange(&v1.Node{Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
		{Type: v1.NodeHostName, Address: "me"}, {Type: v1.NodeInternalIP, Address: "10.0.2.15"}}}})
	p.SyncNow()
	if got, want := virtualServers(), []string{"10.0.2.15:30080/TCP", "10.96.0.10:80/TCP", "10.96.0.11:80/TCP"}; !slices.Equal(got, want) {
		t.Fatalf("with primary: virtual servers %v, want %v", got, want)
	}
	// --bind-address overrides the Node's primary address of its family.
	p.cfg.PrimaryOverride = b
	p.drift.needFull = true
	p.SyncNow()
	if got, want := virtualServers(), []string{"10.96.0.10:80/TCP", "10.96.0.11:80/TCP", "192.168.7.1:30080/TCP"}; !slices.Equal(got, want) {
		t.Fatalf("with primary %s from --bind-address: virtual servers %v, want %v", b, got, want)
	}

	// The last node port gone: its rule goes with its set's entries.
	p.OnServiceDelete(desired.ServiceOf(web))
	p.SyncNow()
	if strings.Contains(k.Sets.Dump(), desired.SetNodePortTCP) || nodePortRule() {
		t.Fatalf("node port entry, or its rule, left behind:\n%s", k.Sets.Dump())
	}
}

func TestNodePortFilter(t *testing.T) {
	all := []netip.Addr{netip.MustParseAddr("10.0.2.15"), netip.MustParseAddr("192.168.7.1"),
		netip.MustParseAddr("fd00:2::15"), netip.MustParseAddr("fd00:7::1")}
	primary := [2]netip.Addr{netip.MustParseAddr("192.168.7.1"), netip.MustParseAddr("fd00:7::1")}
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"unset: every address": {Config{}, "10.0.2.15 192.168.7.1 fd00:2::15 fd00:7::1"},
		// Upstream decides per family: one it is given no CIDR of is served on every address.
		"a CIDR": {Config{NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "10.0.2.15 fd00:2::15 fd00:7::1"},
		"all":    {Config{NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}, "10.0.2.15 192.168.7.1 fd00:2::15 fd00:7::1"},
		// localhost: loopback CIDRs of both families, which no address NodePorts are served on is in.
		"localhost": {Config{NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}, ""},
		"localhost and a CIDR": {Config{NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"),
			netip.MustParsePrefix("10.0.0.0/8")}}, "10.0.2.15"},
		"primary":            {Config{NodePortPrimary: true}, "192.168.7.1 fd00:7::1"},
		"primary and a CIDR": {Config{NodePortPrimary: true, NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("10.0.2.0/24")}}, "10.0.2.15 192.168.7.1 fd00:7::1"},
		"an IPv6 CIDR alone": {Config{NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("fd00:2::/64")}}, "10.0.2.15 192.168.7.1 fd00:2::15"},
	} {
		var got []string
		for _, a := range c.cfg.nodePortFilter(all, primary) {
			got = append(got, a.String())
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%s: %v, want %s", name, got, c.want)
		}
	}
}

// TestNodeCIDRFollowsTheNode: with --detect-local-mode=NodeCIDR, cluster-IP
// traffic is masqueraded as without a pod CIDR until the Node has one, and
// from then on unless it comes from that CIDR; no Service is recomputed.
func TestNodeCIDRFollowsTheNode(t *testing.T) {
	k := fakekernel.Bare()
	ipt := &iptables.Fake{}
	p := New(Config{Desired: desired.Config{NodeName: "me"}, Glue: glue.Config{MasqueradeBit: 14, DetectLocal: glue.DetectNodeCIDR}, SyncPeriod: time.Hour},
		Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: ipt, NodeAddrs: &nodeaddrs.Fake{}},
		zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
	p.OnServiceAdd(desired.ServiceOf(testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	masqRule := func() string {
		saved, _ := ipt.Save()
		for _, l := range strings.Split(string(saved), "\n") {
			if strings.Contains(l, "KUBE-CLUSTER-IP") && strings.HasSuffix(l, "-j KUBE-MARK-MASQ") {
				return l
			}
		}
		return ""
	}
	if r := masqRule(); !strings.Contains(r, "src,dst") {
		t.Fatalf("without a pod CIDR: %q, want the service-address rule", r)
	}
	k.Ops()

	node := &v1.Node{}
	node.Name = "me"
	node.Spec.PodCIDRs = []string{"fd00:1::/64", "10.244.3.0/24"}
	p.OnNodeChange(node)
	p.SyncNow()
	if r := masqRule(); !strings.Contains(r, "! -s 10.244.3.0/24") || !strings.Contains(r, "dst,dst") {
		t.Errorf("with pod CIDR 10.244.3.0/24: %q", r)
	}
	if ops := k.Ops(); len(ops) != 0 {
		t.Errorf("a pod CIDR change wrote kernel objects: %v", ops)
	}
}

// A proxier restarted while the node's addresses cannot be listed (say,
// every dump interrupted) writes nothing until they are: computed from no
// addresses, the node's NodePorts would be deleted and an external IP the
// node holds bound to kube-ipvs0. Once read, nothing needs writing.
func TestARestartWaitsForTheNodeAddresses(t *testing.T) {
	k := fakekernel.Bare()
	addrs := &nodeaddrs.Fake{}
	node := netip.MustParseAddr("10.0.2.15")
	addrs.Set(nil, node)
	web := testobj.Service("10.96.0.10", v1.ServicePort{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080})
	web.Spec.Type = v1.ServiceTypeNodePort
	web.Spec.ExternalIPs = []string{node.String()}
	start := func() *Proxier {
		p := New(Config{Desired: desired.Config{NodeName: "me"}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour},
			Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: &iptables.Fake{}, NodeAddrs: addrs},
			zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
		p.OnServiceAdd(desired.ServiceOf(web))
		p.OnServicesSynced()
		p.OnEndpointSlicesSynced()
		return p
	}
	start().SyncNow()
	ipvsBefore, linkBefore := k.IPVS.Dump(), k.Links.Dump()
	if !strings.Contains(ipvsBefore, "-A 10.0.2.15:30080/TCP") || !strings.Contains(ipvsBefore, "-A 10.0.2.15:80/TCP") || strings.Contains(linkBefore, "10.0.2.15") {
		t.Fatalf("first proxier: node port and external IP not as expected:\n%s\nbound: %s", ipvsBefore, linkBefore)
	}
	k.Ops()

	addrs.Set(errors.New("list links: netlink dump interrupted"))
	p := start()
	p.SyncNow()
	p.SyncNow()
	if ops := k.Ops(); len(ops) != 0 {
		t.Fatalf("wrote %q with no node address list", ops)
	}
	if !p.drift.lastFull.IsZero() {
		t.Fatal("the first sync counted as done without the node's addresses")
	}
	addrs.Set(nil, node)
	p.SyncNow()
	for _, op := range k.Ops() {
		if strings.Contains(op, "10.0.2.15") {
			t.Errorf("once the addresses were read: %s", op)
		}
	}
	if got := k.IPVS.Dump(); got != ipvsBefore {
		t.Errorf("virtual servers now\n%s\nwant\n%s", got, ipvsBefore)
	}
}

// A Node's addresses and pod CIDRs are read like every API address: an
// IPv4 address with leading zeros in decimal, as upstream reads it.
func TestNodeFactsReadLegacyAddresses(t *testing.T) {
	node := &v1.Node{
		Spec:   v1.NodeSpec{PodCIDRs: []string{"010.244.001.000/24"}},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "010.000.002.015"}}},
	}
	f := factsOf(node)
	if got := f.primary[desired.IPv4]; got != netip.MustParseAddr("10.0.2.15") {
		t.Errorf("primary address %v", got)
	}
	if got := f.podCIDR[desired.IPv4]; got != netip.MustParsePrefix("10.244.1.0/24") {
		t.Errorf("pod CIDR %v", got)
	}
}

// TestHealthCheckListen: health checks listen per family on the wildcard
// address when --nodeport-addresses keeps every address of the family, else
// on the node addresses it keeps, as upstream binds them; IPv6 only on a
// node that has it.
func TestHealthCheckListen(t *testing.T) {
	a4, b4, a6 := netip.MustParseAddr("10.0.2.15"), netip.MustParseAddr("192.168.7.1"), netip.MustParseAddr("fd00:2::15")
	all := []netip.Addr{a4, b4, a6}
	for name, c := range map[string]struct {
		cfg  Config
		want string
	}{
		"unset":     {Config{}, "IPv4 all, IPv6 all"},
		"no IPv6":   {Config{Desired: desired.Config{}}, "IPv4 all"},
		"a CIDR":    {Config{NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "IPv4 [10.0.2.15], IPv6 all"},
		"all":       {Config{NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("fd00::/8")}}, "IPv4 all, IPv6 [fd00:2::15]"},
		"primary":   {Config{NodePortPrimary: true}, "IPv4 [192.168.7.1], IPv6 all"},
		"localhost": {Config{NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}, "IPv4 [], IPv6 []"},
		"IPv6 CIDR": {Config{NodePortAddresses: []netip.Prefix{netip.MustParsePrefix("fd00:9::/64")}}, "IPv4 all, IPv6 []"},
	} {
		if name != "no IPv6" {
			c.cfg.Desired.IPv6Capable = true
		}
		p := &Proxier{cfg: c.cfg}
		primary := [2]netip.Addr{b4}
		p.nodeIPs.current = desired.Node{All: all, NodePort: c.cfg.nodePortFilter(all, primary), Primary: primary}
		var got []string
		for _, f := range p.families() {
			on := p.healthCheckListen()[f]
			if on.All {
				got = append(got, f.String()+" all")
			} else {
				got = append(got, fmt.Sprintf("%s %v", f, on.Addrs))
			}
		}
		if strings.Join(got, ", ") != c.want {
			t.Errorf("%s: %s, want %s", name, strings.Join(got, ", "), c.want)
		}
	}
}
