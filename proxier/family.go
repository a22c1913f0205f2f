package proxier

import (
	"net/netip"

	discovery "k8s.io/api/discovery/v1"
)

// ipFamily is IPv4 or IPv6. As upstream, each family has ipsets and
// iptables chains of its own (the KUBE-6- sets, ip6tables), while IPVS and
// kube-ipvs0 hold both; a Service is programmed in each family it has a
// cluster IP of. It indexes per-family arrays.
type ipFamily int

const (
	ipv4 ipFamily = iota
	ipv6
)

// families are the IP families, IPv4 first.
var families = [...]ipFamily{ipv4, ipv6}

func familyOf(a netip.Addr) ipFamily {
	if a.Unmap().Is4() {
		return ipv4
	}
	return ipv6
}

// holds says whether a is of this family.
func (f ipFamily) holds(a netip.Addr) bool { return a.IsValid() && familyOf(a) == f }

// set is this family's name of the ipset upstream names name for IPv4.
func (f ipFamily) set(name string) string {
	if f == ipv6 {
		return ipv6SetName(name)
	}
	return name
}

func (f ipFamily) String() string {
	if f == ipv6 {
		return "IPv6"
	}
	return "IPv4"
}

// addressType is the family's EndpointSlice address type.
func (f ipFamily) addressType() discovery.AddressType {
	if f == ipv6 {
		return discovery.AddressTypeIPv6
	}
	return discovery.AddressTypeIPv4
}
