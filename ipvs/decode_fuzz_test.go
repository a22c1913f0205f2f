package ipvs

import (
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// FuzzDecode feeds the GET_SERVICE and GET_DEST decoders any bytes, and
// replies built the way the kernel builds them from any field values. Any
// bytes: no panic, and what decodes is an address of the family the reply
// names, without the kernel's own "hashed" flag. A kernel-shaped reply:
// it decodes to the fields it was built from.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{cmdGetService, 1, 0, 0, 8, 0, 1, 0x80, 6, 0, 1, 0, 2}, uint16(syscall.AF_INET), []byte{10, 96, 0, 10}, uint16(6), uint16(80), "rr", uint32(1), uint32(10800), int32(1))
	f.Add([]byte{}, uint16(syscall.AF_INET6), netip.MustParseAddr("fd00::10").AsSlice(), uint16(132), uint16(0), "mh", uint32(0x18), uint32(0), int32(-1))
	f.Add(reply(attrDest, func(b []byte) []byte { return nlbatch.Attr(b, destAddr, []byte{1, 2}) }), uint16(0), []byte{1}, uint16(99), uint16(65535), "", uint32(0xffffffff), uint32(1), int32(0))
	f.Fuzz(func(t *testing.T, raw []byte, af uint16, address []byte, proto, port uint16, sched string, flags, timeout uint32, weight int32) {
		for _, af := range []uint16{syscall.AF_INET, syscall.AF_INET6, af} {
			if vs, ok := decodeService(raw); ok {
				if !vs.Address.IsValid() || vs.Flags&flagHashed != 0 {
					t.Fatalf("decodeService(%x) = %+v", raw, vs)
				}
			}
			if rs, ok := decodeDest(raw, af); ok && !rs.Address.IsValid() {
				t.Fatalf("decodeDest(%x, %d) = %+v", raw, af, rs)
			}
		}

		want := VirtualServer{Key: Key{Protocol: protocolFromNumber(proto), Port: port}, Scheduler: sched, Flags: flags &^ flagHashed, Timeout: timeout}
		a, ok := netip.AddrFromSlice(address)
		if !ok || strings.ContainsRune(sched, 0) || a.Is4In6() {
			return
		}
		want.Key.Address = a
		fam := uint16(syscall.AF_INET)
		if a.Is6() {
			fam = syscall.AF_INET6
		}
		body := reply(attrService, func(b []byte) []byte {
			b = nlbatch.Attr(b, svcAF, nlbatch.U16(fam))
			b = nlbatch.Attr(b, svcProtocol, nlbatch.U16(proto))
			b = nlbatch.Attr(b, svcAddr, union(a))
			b = nlbatch.Attr(b, svcPort, nlbatch.BE16(port))
			b = nlbatch.Attr(b, svcSchedName, nlbatch.String(sched))
			b = nlbatch.Attr(b, svcFlags, append(nlbatch.U32(flags), nlbatch.U32(0xffffffff)...))
			return nlbatch.Attr(b, svcTimeout, nlbatch.U32(timeout))
		})
		if len(body) > 0xffff {
			return // one attribute's length is 16 bits
		}
		if got, ok := decodeService(body); !ok || got != want {
			t.Fatalf("decodeService of a kernel reply = %+v, %v; want %+v", got, ok, want)
		}
		wantRS := RealServer{Address: a, Port: port, Weight: int32(weight), ActiveConns: int32(timeout), InactiveConns: int32(flags)}
		dest := reply(attrDest, func(b []byte) []byte {
			b = nlbatch.Attr(b, destAddr, union(a))
			b = nlbatch.Attr(b, destPort, nlbatch.BE16(port))
			b = nlbatch.Attr(b, destWeight, nlbatch.U32(uint32(weight)))
			b = nlbatch.Attr(b, destActiveConns, nlbatch.U32(timeout))
			b = nlbatch.Attr(b, destInactConns, nlbatch.U32(flags))
			return nlbatch.Attr(b, destAddrFamily, nlbatch.U16(fam))
		})
		if got, ok := decodeDest(dest, af); !ok || got != wantRS {
			t.Fatalf("decodeDest of a kernel reply = %+v, %v; want %+v", got, ok, wantRS)
		}
	})
}
