package desired

import (
	"testing"

	discovery "k8s.io/api/discovery/v1"
)

// TestSliceFamily: only IPv4 and IPv6 slices have a family; an FQDN slice
// or a type the API may add later programs nothing.
func TestSliceFamily(t *testing.T) {
	for _, c := range []struct {
		t    discovery.AddressType
		want Family
		ok   bool
	}{
		{discovery.AddressTypeIPv4, IPv4, true},
		{discovery.AddressTypeIPv6, IPv6, true},
		{discovery.AddressTypeFQDN, IPv4, false},
		{"IPv7", IPv4, false},
	} {
		if f, ok := SliceFamily(c.t); f != c.want || ok != c.ok {
			t.Errorf("SliceFamily(%q) = %v, %v; want %v, %v", c.t, f, ok, c.want, c.ok)
		}
	}
}
