package ipvs

import (
	"net/netip"
	"syscall"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// reply builds a generic netlink reply body holding one nested attribute,
// as the kernel sends them.
func reply(typ uint16, fill func([]byte) []byte) []byte {
	return nlbatch.Nest([]byte{cmdGetService, genlIPVSv1, 0, 0}, typ|nlbatch.Nested, fill)
}

func union(a netip.Addr) []byte {
	b := make([]byte, 16)
	copy(b, a.AsSlice())
	return b
}

func TestDecodeServiceReadsWhatTheKernelSends(t *testing.T) {
	want := VirtualServer{Key: Key{Address: netip.MustParseAddr("10.96.0.10"), Protocol: UDP, Port: 53},
		Scheduler: "sh", Flags: FlagPersistent | FlagSchedFallback, Timeout: 10800}
	body := reply(attrService, func(b []byte) []byte {
		b = nlbatch.Attr(b, svcAF, nlbatch.U16(syscall.AF_INET))
		b = nlbatch.Attr(b, svcProtocol, nlbatch.U16(17))
		b = nlbatch.Attr(b, svcAddr, union(want.Address))
		b = nlbatch.Attr(b, svcPort, nlbatch.BE16(53))
		b = nlbatch.Attr(b, svcSchedName, nlbatch.String("sh"))
		b = nlbatch.Attr(b, svcFlags, append(nlbatch.U32(want.Flags|flagHashed), nlbatch.U32(0xffffffff)...))
		b = nlbatch.Attr(b, svcTimeout, nlbatch.U32(10800))
		b = nlbatch.Attr(b, svcNetmask, nlbatch.U32(0xffffffff))
		return nlbatch.Nest(b, 10|nlbatch.Nested, func(b []byte) []byte { return nlbatch.Attr(b, 1, nlbatch.U32(7)) }) // stats
	})
	got, ok := decodeService(body)
	if !ok || got != want {
		t.Fatalf("decodeService = %+v, %v; want %+v", got, ok, want)
	}

	fwmark := reply(attrService, func(b []byte) []byte {
		b = nlbatch.Attr(b, svcAF, nlbatch.U16(syscall.AF_INET))
		b = nlbatch.Attr(b, svcFWMark, nlbatch.U32(5))
		return nlbatch.Attr(b, svcAddr, make([]byte, 16))
	})
	if _, ok := decodeService(fwmark); ok {
		t.Error("a firewall-mark service was decoded as an address/port one")
	}
	if _, ok := decodeService([]byte{cmdGetService, 1}); ok {
		t.Error("a truncated reply was decoded")
	}
}

func TestDecodeDestTakesTheFamilyFromTheKernelWhenGiven(t *testing.T) {
	rs := func(af uint16, a netip.Addr) []byte {
		return reply(attrDest, func(b []byte) []byte {
			b = nlbatch.Attr(b, destAddr, union(a))
			b = nlbatch.Attr(b, destPort, nlbatch.BE16(8080))
			b = nlbatch.Attr(b, destWeight, nlbatch.U32(3))
			b = nlbatch.Attr(b, destActiveConns, nlbatch.U32(4))
			b = nlbatch.Attr(b, destInactConns, nlbatch.U32(5))
			if af != 0 {
				b = nlbatch.Attr(b, destAddrFamily, nlbatch.U16(af))
			}
			return b
		})
	}
	v4 := netip.MustParseAddr("10.244.1.7")
	want := RealServer{Address: v4, Port: 8080, Weight: 3, ActiveConns: 4, InactiveConns: 5}
	if got, ok := decodeDest(rs(0, v4), syscall.AF_INET); !ok || got != want {
		t.Errorf("without a family attribute: %+v, %v; want %+v", got, ok, want)
	}
	v6 := netip.MustParseAddr("fd00::7")
	want.Address = v6
	if got, ok := decodeDest(rs(syscall.AF_INET6, v6), syscall.AF_INET); !ok || got != want {
		t.Errorf("IPv6 real server of an IPv4 virtual server: %+v, %v; want %+v", got, ok, want)
	}
}
