package objects

import (
	"fmt"
	"net/netip"
	"strconv"
)

// SetType is an ipset type name.
type SetType string

const (
	HashIP          SetType = "hash:ip"
	HashIPPort      SetType = "hash:ip,port"
	HashIPPortIP    SetType = "hash:ip,port,ip"
	HashIPPortNet   SetType = "hash:ip,port,net"
	BitmapPort      SetType = "bitmap:port"
	DefaultHashSize         = 1024
	DefaultMaxElem          = 65536
)

// Set describes one set. Family is "inet" or "inet6" (ignored for bitmap:port).
type Set struct {
	Name     string
	Type     SetType
	Family   string
	HashSize uint32
	MaxElem  uint32
	Comment  string // what the set is for; documentation only, never sent to the kernel
}

// Entry is one member. Which fields are set depends on the set type:
// hash:ip uses IP; hash:ip,port adds Protocol and Port; hash:ip,port,ip adds
// IP2; hash:ip,port,net adds a network (WithNet, Net); bitmap:port uses only
// Port. Entries are map keys in the reconciler's tables, each held several
// times, so an entry is kept small: the protocol by its number, and the
// network in IP2's field (no set type has both).
type Entry struct {
	IP       netip.Addr
	IP2      netip.Addr // the second address, or the network's (masked) address
	Port     uint16
	Protocol EntryProtocol
	cidr2    uint8 // the network's prefix length + 1; 0: no network
}

// WithNet is e with the network n (masked), as hash:ip,port,net holds it.
func (e Entry) WithNet(n netip.Prefix) Entry {
	if !n.IsValid() {
		e.IP2, e.cidr2 = netip.Addr{}, 0
		return e
	}
	e.IP2, e.cidr2 = n.Masked().Addr(), uint8(n.Bits()+1)
	return e
}

// Net is the entry's network, or the zero Prefix if it has none.
func (e Entry) Net() netip.Prefix {
	if e.cidr2 == 0 {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(e.IP2, int(e.cidr2)-1)
}

// EntryProtocol is an entry's IP protocol by its number; 0 is none.
type EntryProtocol uint8

const (
	EntryTCP  EntryProtocol = 6
	EntryUDP  EntryProtocol = 17
	EntrySCTP EntryProtocol = 132
)

// EntryProtocolOf is p's number as an entry carries it (0 if unknown).
func EntryProtocolOf(p Protocol) EntryProtocol { return EntryProtocol(p.Number()) }

// String is the protocol as ipset names it: "tcp", "udp", "sctp", or its
// number.
func (p EntryProtocol) String() string {
	switch p {
	case EntryTCP:
		return "tcp"
	case EntryUDP:
		return "udp"
	case EntrySCTP:
		return "sctp"
	}
	return strconv.Itoa(int(p))
}

// String prints the entry the way `ipset save` does.
func (e Entry) String() string {
	if !e.IP.IsValid() {
		return strconv.Itoa(int(e.Port))
	}
	s := e.IP.String()
	if e.Protocol != 0 {
		s += fmt.Sprintf(",%s:%d", e.Protocol, e.Port)
	}
	if n := e.Net(); n.IsSingleIP() {
		s += "," + n.Addr().String() // ipset(8) leaves a host's /32 or /128 off
	} else if n.IsValid() {
		s += "," + n.String()
	} else if e.IP2.IsValid() {
		s += "," + e.IP2.String()
	}
	return s
}
