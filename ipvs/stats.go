package ipvs

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// Counters are IPVS's statistics of a virtual or real server since it was
// made: connections scheduled, packets and bytes in each direction.
type Counters struct {
	Connections, PacketsIn, PacketsOut, BytesIn, BytesOut uint64
}

// VirtualServerStats are a virtual server's counters and its real servers'.
type VirtualServerStats struct {
	Key
	Counters
	Reals []RealServerStats
}

// RealServerStats are a real server's connections now and its counters.
type RealServerStats struct {
	ID                         netip.AddrPort
	ActiveConns, InactiveConns int32
	Counters
}

// StatsReader reads the statistics of the virtual servers and, one virtual
// server at a time, of their real servers (--ipvs-stats): the kernel has
// no dump of every real server.
type StatsReader interface {
	VirtualServerStats() ([]VirtualServerStats, error)
	RealServerStats(k Key) ([]RealServerStats, error)
}

// StatsTap is a table whose real-server reads hand on the statistics the
// kernel sends with them (see Netlink.TapRealServerStats).
type StatsTap interface {
	TapRealServerStats(fn func(Key, []RealServerStats))
}

// Statistics attributes (include/uapi/linux/ip_vs.h): the 64-bit set, and
// the older one whose connection and packet counts are 32-bit.
const (
	svcStats     = 10
	svcStats64   = 12
	destStats    = 10
	destStats64  = 12
	statsConns   = 1
	statsInPkts  = 2
	statsOutPkts = 3
	statsInBytes = 4
	statsOutByte = 5
)

// decodeCounters reads a reply's counters from the nested attribute of
// the service or dest (outer), preferring the 64-bit set.
func decodeCounters(body []byte, outer, stats, stats64 uint16) Counters {
	var old, wide []byte
	nlbatch.Attrs(nested(body, outer), func(t uint16, v []byte) {
		switch t {
		case stats:
			old = v
		case stats64:
			wide = v
		}
	})
	var c Counters
	n := func(v []byte, bits64 bool) uint64 {
		if bits64 && len(v) >= 8 {
			return u64(v)
		}
		return uint64(u32(v))
	}
	set, is64 := wide, true
	if set == nil {
		set, is64 = old, false
	}
	nlbatch.Attrs(set, func(t uint16, v []byte) {
		switch t {
		case statsConns:
			c.Connections = n(v, is64)
		case statsInPkts:
			c.PacketsIn = n(v, is64)
		case statsOutPkts:
			c.PacketsOut = n(v, is64)
		case statsInBytes:
			c.BytesIn = n(v, true)
		case statsOutByte:
			c.BytesOut = n(v, true)
		}
	})
	return c
}

// Stats lists every virtual server with its counters and its real servers
// with theirs: one dump, and one per virtual server.
func (n *Netlink) Stats() ([]VirtualServerStats, error) {
	out, err := n.VirtualServerStats()
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Reals, err = n.RealServerStats(out[i].Key); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// VirtualServerStats lists every virtual server with its counters, in one
// dump, without real servers.
func (n *Netlink) VirtualServerStats() ([]VirtualServerStats, error) {
	var out []VirtualServerStats
	err := nlbatch.Whole(func() error {
		out = out[:0]
		return n.r.Dump(nlbatch.Request{Type: n.family, Data: []byte{cmdGetService, genlIPVSv1, 0, 0}}, func(body []byte) {
			if vs, ok := decodeService(body); ok {
				out = append(out, VirtualServerStats{Key: vs.Key, Counters: decodeCounters(body, attrService, svcStats, svcStats64)})
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	return out, nil
}

// RealServerStats dumps virtual server k's real servers with their
// statistics, in small reads (see Netlink.d); none if k is gone.
func (n *Netlink) RealServerStats(k Key) ([]RealServerStats, error) {
	af := family(k.Address)
	n.scratchMu.Lock()
	defer n.scratchMu.Unlock()
	err := nlbatch.Whole(func() error {
		n.scratch = n.scratch[:0]
		return n.d.Dump(nlbatch.Request{Type: n.family, Data: encodeKey(cmdGetDest, k)}, func(body []byte) {
			if rs, ok := decodeDest(body, af); ok {
				n.scratch = append(n.scratch, RealServerStats{ID: rs.ID(), ActiveConns: rs.ActiveConns, InactiveConns: rs.InactiveConns,
					Counters: decodeCounters(body, attrDest, destStats, destStats64)})
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list real servers of %s: %w", k, err)
	}
	return slices.Clone(n.scratch), nil
}

// VirtualServerStats lists the fake's virtual servers; the fake counts no
// traffic.
func (f *Fake) VirtualServerStats() ([]VirtualServerStats, error) {
	if _, err := f.ops.Begin("stats"); err != nil {
		return nil, err
	}
	vss, err := f.VirtualServers()
	if err != nil {
		return nil, err
	}
	out := make([]VirtualServerStats, 0, len(vss))
	for _, vs := range vss {
		out = append(out, VirtualServerStats{Key: vs.Key})
	}
	return out, nil
}

// RealServerStats lists the real servers of the fake's virtual server k
// with their connections.
func (f *Fake) RealServerStats(k Key) ([]RealServerStats, error) {
	if _, err := f.ops.Begin("stats-rs " + k.String()); err != nil {
		return nil, err
	}
	var out []RealServerStats
	for _, rs := range f.realServers(k) {
		out = append(out, RealServerStats{ID: rs.ID(), ActiveConns: rs.ActiveConns, InactiveConns: rs.InactiveConns})
	}
	return out, nil
}
