package desired

import (
	"net/netip"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// TestRoutedClusterIPsAreNotBound: with the Service CIDR made local by a
// route, a cluster IP inside it is not bound to kube-ipvs0, an external IP
// outside it is; both stay in KUBE-IPVS-IPS, as upstream has them, and
// the virtual servers are the same as without the route.
func TestRoutedClusterIPsAreNotBound(t *testing.T) {
	tcp := v1.ProtocolTCP
	svc := testobj.Service("10.96.0.83", testobj.Port("", tcp, 80))
	svc.Spec.ExternalIPs = []string{"192.0.2.83"}
	eps := []*discovery.EndpointSlice{testobj.Slice("a", []discovery.EndpointPort{testobj.SlicePort("", tcp, 8080)}, testobj.EP{IP: "10.244.0.1"})}
	cfg := &Config{NodeName: "me"}
	plain, _ := Compute(ServiceOf(svc), read(eps...), cfg, Node{})
	routed, problems := Compute(ServiceOf(svc), read(eps...), cfg, Node{Routed: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}})
	if len(problems) > 0 {
		t.Fatal(problems)
	}
	if want := []netip.Addr{netip.MustParseAddr("192.0.2.83")}; !slices.Equal(routed.Addresses, want) {
		t.Errorf("addresses %v, want %v", routed.Addresses, want)
	}
	for _, ip := range []string{"10.96.0.83", "192.0.2.83"} {
		e := SetEntry{SetIPVSIPs, objects.Entry{IP: netip.MustParseAddr(ip)}}
		if !slices.Contains(routed.Entries, e) {
			t.Errorf("KUBE-IPVS-IPS lacks %s: %v", ip, routed.Entries)
		}
	}
	if routed.String() == plain.String() {
		t.Fatal("routing changed nothing")
	}
	plain.Addresses, routed.Addresses = nil, nil
	if routed.String() != plain.String() {
		t.Errorf("besides addresses, routed\n%s\ndiffers from\n%s", routed.String(), plain.String())
	}
}
