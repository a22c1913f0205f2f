package ipvs

import (
	"fmt"
	"net/netip"
)

// Protocol is a transport protocol as Kubernetes spells it.
type Protocol string

const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// Number returns the IP protocol number, or 0 for an unknown protocol.
func (p Protocol) Number() uint16 {
	switch p {
	case TCP:
		return 6
	case UDP:
		return 17
	case SCTP:
		return 132
	}
	return 0
}

func protocolFromNumber(n uint16) Protocol {
	switch n {
	case 6:
		return TCP
	case 17:
		return UDP
	case 132:
		return SCTP
	}
	return Protocol(fmt.Sprintf("proto-%d", n))
}

// Service flags as the kernel defines them (IP_VS_SVC_F_*).
const (
	FlagPersistent uint32 = 0x0001
	flagHashed     uint32 = 0x0002 // set by the kernel on every listed service
	// FlagSchedFallback (SCHED1) and FlagSchedPort (SCHED2) mean, for
	// the sh and mh schedulers, "skip unavailable real servers" and "hash
	// the source port as well"; ipvsadm shows them as sh-fallback/sh-port
	// or mh-fallback/mh-port.
	FlagSchedFallback uint32 = 0x0008
	FlagSchedPort     uint32 = 0x0010
)

// Key identifies a virtual server: the kernel allows one per address, protocol and port.
type Key struct {
	Address  netip.Addr
	Protocol Protocol
	Port     uint16
}

func (k Key) String() string {
	return fmt.Sprintf("%s/%s", netip.AddrPortFrom(k.Address, k.Port), k.Protocol)
}

// VirtualServer is one IPVS service.
type VirtualServer struct {
	Key
	Scheduler string
	Flags     uint32
	// Timeout is the persistence timeout in seconds; it only matters with FlagPersistent.
	Timeout uint32
}

// RealServer is one destination of a virtual server. Forwarding is always
// masquerade (NAT), the only method a service proxy uses.
type RealServer struct {
	Address netip.Addr
	Port    uint16
	Weight  int
	// Connection counters, filled in only when listed from the kernel.
	ActiveConns, InactiveConns int
}

// ID is what identifies a real server within its virtual server.
func (r RealServer) ID() netip.AddrPort { return netip.AddrPortFrom(r.Address, r.Port) }

// OpKind says what an Op does.
type OpKind uint8

const (
	AddVS OpKind = iota + 1
	UpdateVS
	DeleteVS
	AddRS
	UpdateRS
	DeleteRS
)

// Op is one write to the IPVS table. Virtual server ops use VS; real server
// ops use VS.Key to name the virtual server, and RS.
type Op struct {
	Kind OpKind
	VS   VirtualServer
	RS   RealServer
}

func (o Op) String() string {
	switch o.Kind {
	case AddVS:
		return "add virtual server " + o.VS.Key.String()
	case UpdateVS:
		return "update virtual server " + o.VS.Key.String()
	case DeleteVS:
		return "delete virtual server " + o.VS.Key.String()
	case AddRS:
		return fmt.Sprintf("add real server %s to %s", o.RS.ID(), o.VS.Key)
	case UpdateRS:
		return fmt.Sprintf("update real server %s of %s", o.RS.ID(), o.VS.Key)
	case DeleteRS:
		return fmt.Sprintf("delete real server %s of %s", o.RS.ID(), o.VS.Key)
	}
	return fmt.Sprintf("op %d on %s", o.Kind, o.VS.Key)
}

// Interface is the IPVS table of one network namespace.
type Interface interface {
	VirtualServers() ([]VirtualServer, error)
	GetVirtualServer(Key) (vs VirtualServer, ok bool, err error)
	// RealServers returns a new slice, which the caller may keep.
	RealServers(Key) ([]RealServer, error)
	// Write applies the ops in order and returns one result per op (nil:
	// done). An op failing does not stop the ones after it.
	Write([]Op) []error
}

// TableReader is what an Interface offers when it can list every virtual
// server's real servers in one read, /proc/net/ip_vs: in the emulated test
// VM ~0.03 s for 1k virtual servers where a netlink dump per virtual server
// takes ~0.3 s. But the kernel fills a page per read(2) and resumes each by
// walking its table from the start, so the read is quadratic: 1.5 s at 10k,
// minutes at 50k. Callers use it for small tables only, and dump what it
// misses (a virtual server added, or skipped as the table changed between
// pages) over netlink.
type TableReader interface {
	AllRealServers() (map[Key][]RealServer, error)
}
