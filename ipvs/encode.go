package ipvs

import (
	"net/netip"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// The IPVS generic netlink protocol (include/uapi/linux/ip_vs.h).
const (
	cmdNewService = 1
	cmdSetService = 2
	cmdDelService = 3
	cmdNewDest    = 5
	cmdSetDest    = 6
	cmdDelDest    = 7

	attrService = 1
	attrDest    = 2

	svcAF        = 1
	svcProtocol  = 2
	svcAddr      = 3
	svcPort      = 4
	svcSchedName = 6
	svcFlags     = 7
	svcTimeout   = 8
	svcNetmask   = 9

	destAddr      = 1
	destPort      = 2
	destFwdMethod = 3
	destWeight    = 4
	destUThresh   = 5
	destLThresh   = 6

	fwdMasq    = 0
	genlIPVSv1 = 1
)

var opCommands = map[OpKind]uint8{
	AddVS: cmdNewService, UpdateVS: cmdSetService, DeleteVS: cmdDelService,
	AddRS: cmdNewDest, UpdateRS: cmdSetDest, DeleteRS: cmdDelDest,
}

// encode builds the generic netlink payload of one op: the command header,
// the virtual server (all of it when adding or updating one, its key
// otherwise) and the real server.
func encode(op Op) []byte {
	b := []byte{opCommands[op.Kind], genlIPVSv1, 0, 0}
	full := op.Kind == AddVS || op.Kind == UpdateVS
	b = nlbatch.Nest(b, attrService, func(b []byte) []byte {
		vs := op.VS
		b = appendKey(b, vs.Key)
		if !full {
			return b
		}
		b = nlbatch.Attr(b, svcSchedName, nlbatch.String(vs.Scheduler))
		b = nlbatch.Attr(b, svcFlags, append(nlbatch.U32(vs.Flags), nlbatch.U32(0xffffffff)...))
		b = nlbatch.Attr(b, svcTimeout, nlbatch.U32(vs.Timeout))
		return nlbatch.Attr(b, svcNetmask, nlbatch.U32(netmask(vs.Address)))
	})
	if op.Kind < AddRS {
		return b
	}
	return nlbatch.Nest(b, attrDest, func(b []byte) []byte {
		rs := op.RS
		b = nlbatch.Attr(b, destAddr, rs.Address.AsSlice())
		b = nlbatch.Attr(b, destPort, nlbatch.BE16(rs.Port))
		if op.Kind == DeleteRS {
			return b
		}
		b = nlbatch.Attr(b, destFwdMethod, nlbatch.U32(fwdMasq))
		b = nlbatch.Attr(b, destWeight, nlbatch.U32(uint32(rs.Weight)))
		b = nlbatch.Attr(b, destUThresh, nlbatch.U32(0))
		return nlbatch.Attr(b, destLThresh, nlbatch.U32(0))
	})
}

// appendKey appends the attributes that name a virtual server.
func appendKey(b []byte, k Key) []byte {
	b = nlbatch.Attr(b, svcAF, nlbatch.U16(family(k.Address)))
	b = nlbatch.Attr(b, svcProtocol, nlbatch.U16(k.Protocol.Number()))
	b = nlbatch.Attr(b, svcAddr, k.Address.AsSlice())
	return nlbatch.Attr(b, svcPort, nlbatch.BE16(k.Port))
}

// encodeKey builds a request naming one virtual server.
func encodeKey(cmd uint8, k Key) []byte {
	return nlbatch.Nest([]byte{cmd, genlIPVSv1, 0, 0}, attrService, func(b []byte) []byte { return appendKey(b, k) })
}

// netmask is what ipvsadm sends for a virtual server without persistence
// granularity: all ones for IPv4, the prefix length for IPv6.
func netmask(a netip.Addr) uint32 {
	if a.Is4() {
		return 0xffffffff
	}
	return 128
}
