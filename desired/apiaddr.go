package desired

import (
	"net/netip"

	netutils "k8s.io/utils/net"
)

// kube-apiserver stores IPv4 addresses with leading zeros ("010.096.000.010")
// unless StrictIPCIDRValidation is on, and upstream kube-proxy reads them in
// decimal with k8s.io/utils/net's sloppy parsers. netip rejects them, so every
// address read from an API object goes through these two functions, which
// accept exactly what the sloppy parsers accept and mean the same by it.
// The common, canonical form takes netip's allocation-free path.

// ParseAddr parses an API object's IP address, IPv4-mapped IPv6 read as
// IPv4 (as upstream's family checks do).
func ParseAddr(s string) (netip.Addr, bool) {
	// netip also takes an IPv6 zone ("fe80::1%eth0"), which upstream does not.
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	a, ok := netip.AddrFromSlice(netutils.ParseIPSloppy(s))
	return a.Unmap(), ok
}

// ParsePrefix parses an API object's CIDR, masked as upstream masks it.
// An IPv4-mapped IPv6 prefix stays one: its length counts 128 bits.
func ParsePrefix(s string) (netip.Prefix, bool) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), true
	}
	_, n, err := netutils.ParseCIDRSloppy(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	ones, bits := n.Mask.Size()
	if !ok || bits != a.BitLen() {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, ones), true
}
