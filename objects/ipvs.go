package objects

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

// Service flags as the kernel defines them (IP_VS_SVC_F_*).
const (
	FlagPersistent uint32 = 0x0001
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
	// The kernel keeps these as 32-bit counters (atomic_t); so do we: a
	// real server is kept twice per endpoint per virtual server (wanted and
	// believed), a million of them at 50k Services, where int cost 16 MB.
	Weight int32
	// Connection counters, filled in only when listed from the kernel.
	ActiveConns, InactiveConns int32
}

// Connected says a real server, as read from the kernel, carries connections.
func (r RealServer) Connected() bool { return r.ActiveConns+r.InactiveConns > 0 }

// ID is what identifies a real server within its virtual server.
func (r RealServer) ID() netip.AddrPort { return netip.AddrPortFrom(r.Address, r.Port) }
