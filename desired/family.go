package desired

import (
	"net/netip"

	discovery "k8s.io/api/discovery/v1"
)

// Family is IPv4 or IPv6. As upstream, each family has ipsets and
// iptables chains of its own (the KUBE-6- sets, ip6tables), while IPVS and
// kube-ipvs0 hold both; a Service is programmed in each family it has a
// cluster IP of. It indexes per-family arrays.
type Family int

const (
	IPv4 Family = iota
	IPv6
)

// Families are the IP families, IPv4 first.
var Families = [...]Family{IPv4, IPv6}

func FamilyOf(a netip.Addr) Family {
	if a.Unmap().Is4() {
		return IPv4
	}
	return IPv6
}

// Holds says whether a is of this family.
func (f Family) Holds(a netip.Addr) bool { return a.IsValid() && FamilyOf(a) == f }

// SetName is this family's name of the ipset upstream names name for IPv4.
func (f Family) SetName(name string) string {
	if f == IPv6 {
		return IPv6SetName(name)
	}
	return name
}

func (f Family) String() string {
	if f == IPv6 {
		return "IPv6"
	}
	return "IPv4"
}

// SliceFamily is the family of an EndpointSlice's address type; false for
// FQDN or any other type, whose slices program nothing.
func SliceFamily(t discovery.AddressType) (Family, bool) {
	for _, f := range Families {
		if t == f.addressType() {
			return f, true
		}
	}
	return IPv4, false
}

// addressType is the family's EndpointSlice address type.
func (f Family) addressType() discovery.AddressType {
	if f == IPv6 {
		return discovery.AddressTypeIPv6
	}
	return discovery.AddressTypeIPv4
}
