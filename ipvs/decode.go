package ipvs

import (
	"encoding/binary"
	"net/netip"
	"syscall"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// Read commands and the attributes only replies carry (include/uapi/linux/ip_vs.h).
const (
	cmdGetService = 4
	cmdGetDest    = 8

	svcFWMark = 5

	destActiveConns = 7
	destInactConns  = 8
	destAddrFamily  = 11

	genlHeaderLen = 4
)

// nested returns the body of the top-level attribute typ of a generic
// netlink message body.
func nested(body []byte, typ uint16) []byte {
	if len(body) < genlHeaderLen {
		return nil
	}
	var out []byte
	nlbatch.Attrs(body[genlHeaderLen:], func(t uint16, v []byte) {
		if t == typ {
			out = v
		}
	})
	return out
}

func u16(v []byte) uint16 {
	if len(v) < 2 {
		return 0
	}
	return binary.NativeEndian.Uint16(v)
}

func u32(v []byte) uint32 {
	if len(v) < 4 {
		return 0
	}
	return binary.NativeEndian.Uint32(v)
}

func be16(v []byte) uint16 {
	if len(v) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(v)
}

// addr reads an address attribute: the kernel sends a 16-byte union whose
// first 4 bytes are the IPv4 address.
func addr(af uint16, v []byte) (netip.Addr, bool) {
	switch {
	case af == syscall.AF_INET && len(v) >= 4:
		return netip.AddrFrom4([4]byte(v[:4])), true
	case af == syscall.AF_INET6 && len(v) >= 16:
		return netip.AddrFrom16([16]byte(v[:16])), true
	}
	return netip.Addr{}, false
}

// decodeService reads a GET_SERVICE reply. Firewall-mark services, which
// are not ours, and malformed ones report false.
func decodeService(body []byte) (VirtualServer, bool) {
	var vs VirtualServer
	var af uint16
	var raw []byte
	var fwmark uint32
	nlbatch.Attrs(nested(body, attrService), func(t uint16, v []byte) {
		switch t {
		case svcAF:
			af = u16(v)
		case svcProtocol:
			vs.Protocol = protocolFromNumber(u16(v))
		case svcAddr:
			raw = v
		case svcPort:
			vs.Port = be16(v)
		case svcFWMark:
			fwmark = u32(v)
		case svcSchedName:
			if n := len(v); n > 0 && v[n-1] == 0 {
				v = v[:n-1]
			}
			vs.Scheduler = string(v)
		case svcFlags:
			vs.Flags = u32(v) &^ flagHashed
		case svcTimeout:
			vs.Timeout = u32(v)
		}
	})
	a, ok := addr(af, raw)
	if !ok || fwmark != 0 {
		return VirtualServer{}, false
	}
	vs.Address = a
	return vs, true
}

// decodeDest reads a GET_DEST reply; af is the virtual server's family,
// which the real server shares unless the kernel says otherwise.
func decodeDest(body []byte, af uint16) (RealServer, bool) {
	var rs RealServer
	var raw []byte
	nlbatch.Attrs(nested(body, attrDest), func(t uint16, v []byte) {
		switch t {
		case destAddr:
			raw = v
		case destPort:
			rs.Port = be16(v)
		case destWeight:
			rs.Weight = int32(u32(v))
		case destActiveConns:
			// The kernel keeps these as atomic_t, which has underflowed
			// before: such a count reads negative, as no connection
			// (a drain ends rather than waiting forever), and the
			// statistics show 0.
			rs.ActiveConns = int32(u32(v))
		case destInactConns:
			rs.InactiveConns = int32(u32(v))
		case destAddrFamily:
			af = u16(v)
		}
	})
	a, ok := addr(af, raw)
	rs.Address = a
	return rs, ok
}

func u64(v []byte) uint64 {
	if len(v) < 8 {
		return 0
	}
	return binary.NativeEndian.Uint64(v)
}
