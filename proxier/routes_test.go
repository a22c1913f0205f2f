package proxier

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
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
	p.OnServiceAdd(web)
	p.OnEndpointSliceAdd(sl)
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
	back.OnServiceAdd(web)
	back.OnEndpointSliceAdd(sl)
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
