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
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// TestLocalRoutesReplaceClusterIPAddresses: in local-route mode the IPv4
// Service CIDR gets one local route and its cluster IPs no address (still
// in KUBE-IPVS-IPS, and the filter rejects the CIDR's unanswered ports);
// an external IP keeps its address. When the ServiceCIDR goes, so does the
// route, and the cluster IP is bound again. A proxier back in the default
// mode deletes a route left behind, once its first sync has bound the
// addresses.
func TestLocalRoutesReplaceClusterIPAddresses(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t, func(c *Config) { c.LocalRoutes = true })
	web := testobj.Service("10.96.0.10", testobj.Port("http", v1.ProtocolTCP, 80))
	web.Name = "web"
	web.Spec.ExternalIPs = []string{"192.0.2.10"}
	sl := testobj.Slice("web-1", []discovery.EndpointPort{testobj.SlicePort("http", v1.ProtocolTCP, 8080)}, testobj.EP{IP: "10.244.0.1"})
	sl.Labels[discovery.LabelServiceName] = "web"
	p.OnServiceAdd(desired.ServiceOf(web))
	p.OnEndpointSliceAdd(desired.SliceOf(sl))
	p.OnServiceCIDRs([]string{"10.96.0.0/12", "fd00:96::/108"})
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()

	cidr := netip.MustParsePrefix("10.96.0.0/12")
	if routes, _ := k.Links.LocalRoutes(); !slices.Equal(routes, []netip.Prefix{cidr}) {
		t.Errorf("local routes %v, want %v", routes, cidr)
	}
	if got := k.Links.Dump(); got != "192.0.2.10" {
		t.Errorf("addresses on kube-ipvs0: %q, want the external IP alone", got)
	}
	if has, _ := k.Sets.Has(desired.SetIPVSIPs, ipset.Entry{IP: netip.MustParseAddr("10.96.0.10")}); !has {
		t.Error("the routed cluster IP is not in KUBE-IPVS-IPS")
	}
	reject := "-A KUBE-IPVS-FILTER -d 10.96.0.0/12 -m conntrack --ctstate NEW -j REJECT"
	if saved, _ := ipt.Save(); !strings.Contains(string(saved), reject) {
		t.Errorf("no %q in\n%s", reject, saved)
	}
	if !strings.Contains(k.IPVS.Dump(), "-A 10.96.0.10:80/TCP") {
		t.Errorf("no virtual server for the cluster IP:\n%s", k.IPVS.Dump())
	}

	p.OnServiceCIDRs(nil)
	p.SyncNow()
	if routes, _ := k.Links.LocalRoutes(); len(routes) > 0 {
		t.Errorf("routes %v left once the ServiceCIDR went", routes)
	}
	if got := k.Links.Dump(); got != "10.96.0.10\n192.0.2.10" {
		t.Errorf("addresses %q, want both bound again", got)
	}

	p.OnServiceCIDRs([]string{"10.96.0.0/12"})
	p.SyncNow()
	back, k2, _, _ := newTestProxier(t)
	_ = k2.Links.EnsureLink() // the node as local-route mode left it
	_ = k2.Links.SetLocalRoutes([]netip.Prefix{cidr})
	_ = k2.Links.AddAddress(netip.MustParseAddr("192.0.2.10"))
	back.OnServiceAdd(desired.ServiceOf(web))
	back.OnEndpointSliceAdd(desired.SliceOf(sl))
	back.OnServicesSynced()
	back.OnEndpointSlicesSynced()
	back.SyncNow()
	if routes, _ := k2.Links.LocalRoutes(); len(routes) > 0 {
		t.Errorf("the default mode left routes %v", routes)
	}
	if got := k2.Links.Dump(); got != "10.96.0.10\n192.0.2.10" {
		t.Errorf("addresses %q in the default mode, want both", got)
	}
}

// TestIPv6ServiceCIDRsRouted: on a dual-stack node each family's Service
// CIDR gets its local route, neither family's cluster IPs an address, and
// each family's filter rejects its own CIDR's unanswered ports; a node
// without IPv6 routes its IPv4 CIDR alone (its kernel may refuse an IPv6
// route, which would keep the IPv4 one from going in too).
func TestIPv6ServiceCIDRsRouted(t *testing.T) {
	k := fakekernel.Bare()
	ipt, ip6t := &iptables.Fake{}, &iptables.Fake{}
	routeDualStack(k, ipt, ip6t, zap.NewNop()).SyncNow()

	want := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:96::/108")}
	if routes, _ := k.Links.LocalRoutes(); !slices.Equal(routes, want) {
		t.Errorf("local routes %v, want %v", routes, want)
	}
	if got := k.Links.Dump(); got != "" {
		t.Errorf("addresses on kube-ipvs0: %q, want none", got)
	}
	if !strings.Contains(k.IPVS.Dump(), "-A [fd00:96::10]:80/TCP") {
		t.Errorf("no virtual server for the IPv6 cluster IP:\n%s", k.IPVS.Dump())
	}
	for _, c := range []struct {
		ipt          *iptables.Fake
		cidr, absent string
	}{{ipt, "10.96.0.0/12", "fd00:96::/108"}, {ip6t, "fd00:96::/108", "10.96.0.0/12"}} {
		saved, _ := c.ipt.Save()
		if reject := "-A KUBE-IPVS-FILTER -d " + c.cidr + " -m conntrack --ctstate NEW -j REJECT"; !strings.Contains(string(saved), reject) {
			t.Errorf("no %q in\n%s", reject, saved)
		}
		if strings.Contains(string(saved), c.absent) {
			t.Errorf("the other family's CIDR %s in\n%s", c.absent, saved)
		}
	}

	// The kernel refuses the IPv6 route (IPv6 disabled on lo, say): the
	// IPv4 CIDR stays routed, the IPv6 cluster IP is bound, the failure
	// logged once over many syncs.
	core, logs := observer.New(zapcore.WarnLevel)
	refused := fakekernel.Bare()
	refused.Links.SetHook(func(op string) error {
		if strings.HasPrefix(op, "add-route fd00:") {
			return errors.New("IPv6 is disabled on nexthop device")
		}
		return nil
	})
	p6 := routeDualStack(refused, &iptables.Fake{}, &iptables.Fake{}, zap.New(core))
	p6.SyncNow()
	p6.SyncNow()
	if routes, _ := refused.Links.LocalRoutes(); !slices.Equal(routes, want[:1]) {
		t.Errorf("IPv6 route refused: local routes %v, want %v", routes, want[:1])
	}
	if got := refused.Links.Dump(); got != "fd00:96::10" {
		t.Errorf("IPv6 route refused: addresses on kube-ipvs0 %q, want the IPv6 cluster IP alone", got)
	}
	if n := logs.FilterMessageSnippet("local routes").Len(); n != 1 {
		t.Errorf("the refused route was logged %d times over two syncs, want once", n)
	}

	only4, k4, _, _ := newTestProxier(t, func(c *Config) { c.LocalRoutes = true })
	only4.OnServiceCIDRs([]string{"fd00:96::/108", "10.96.0.0/12"})
	only4.OnServicesSynced()
	only4.OnEndpointSlicesSynced()
	only4.SyncNow()
	if routes, _ := k4.Links.LocalRoutes(); !slices.Equal(routes, want[:1]) {
		t.Errorf("a node without IPv6: local routes %v, want %v", routes, want[:1])
	}
}

// routeDualStack is a dual-stack proxier in local-route mode on k, given an
// IPv4 and an IPv6 cluster IP and both families' Service CIDRs, its caches
// synced.
func routeDualStack(k fakekernel.Kernel, ipt, ip6t *iptables.Fake, log *zap.Logger) *Proxier {
	p := New(Config{Desired: desired.Config{NodeName: "me", IPv6Capable: true}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour, LocalRoutes: true},
		Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: ipt, IP6Tables: ip6t}, log, healthz.New(time.Minute), metrics.New(), &recordedEvents{})
	for i, ip := range []string{"10.96.0.10", "fd00:96::10"} {
		svc := testobj.Service(ip, testobj.Port("http", v1.ProtocolTCP, 80))
		svc.Name = fmt.Sprintf("web-%d", i)
		p.OnServiceAdd(desired.ServiceOf(svc))
	}
	p.OnServiceCIDRs([]string{"fd00:96::/108", "10.96.0.0/12"})
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	return p
}
