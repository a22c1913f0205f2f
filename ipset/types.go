package ipset

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"strconv"
)

// Type is an ipset type name.
type Type string

const (
	HashIP          Type = "hash:ip"
	HashIPPort      Type = "hash:ip,port"
	HashIPPortIP    Type = "hash:ip,port,ip"
	HashIPPortNet   Type = "hash:ip,port,net"
	BitmapPort      Type = "bitmap:port"
	DefaultHashSize      = 1024
	DefaultMaxElem       = 65536
)

// Set describes one set. Family is "inet" or "inet6" (ignored for bitmap:port).
type Set struct {
	Name     string
	Type     Type
	Family   string
	HashSize uint32
	MaxElem  uint32
	Comment  string // what the set is for; documentation only, never sent to the kernel
}

// Entry is one member. Which fields are set depends on the set type:
// hash:ip uses IP; hash:ip,port adds Protocol and Port; hash:ip,port,ip adds IP2;
// hash:ip,port,net adds Net; bitmap:port uses only Port.
type Entry struct {
	IP       netip.Addr
	Protocol string // "tcp", "udp" or "sctp"
	Port     uint16
	IP2      netip.Addr
	Net      netip.Prefix
}

// String prints the entry the way `ipset save` does.
func (e Entry) String() string {
	if !e.IP.IsValid() {
		return strconv.Itoa(int(e.Port))
	}
	s := e.IP.String()
	if e.Protocol != "" {
		s += fmt.Sprintf(",%s:%d", e.Protocol, e.Port)
	}
	if e.IP2.IsValid() {
		s += "," + e.IP2.String()
	}
	if e.Net.IsValid() {
		s += "," + e.Net.String()
	}
	return s
}

// Interface is the ipsets of one network namespace.
type Interface interface {
	// EnsureSet creates the set if it does not exist; an existing set is kept with its entries.
	EnsureSet(Set) error
	Entries(set string) ([]Entry, error)
	// Count says how many entries the set holds without listing them.
	Count(set string) (int, error)
	// Has tests for one entry without listing the set.
	Has(set string, e Entry) (bool, error)
	// AddEntries and DeleteEntries return one result per entry; adding a
	// present entry or deleting a missing one is not an error.
	AddEntries(set string, entries []Entry) []error
	DeleteEntries(set string, entries []Entry) []error
	// Capacity says how many entries the set can hold: its maxelem, or
	// every port for a bitmap:port set.
	Capacity(set string) (int, error)
	// Grow replaces set s by one of the same entries that can hold
	// maxElem, in one atomic swap: rules that match on s never see it
	// empty. Nothing may write to s meanwhile.
	Grow(s Set, maxElem uint32) error
}

// growName is the temporary set Grow fills before the swap: short, as set
// names are at most 31 bytes.
func growName(set string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(set))
	return fmt.Sprintf("KIP-GROW-%08x", h.Sum32())
}

func protocolNumber(p string) (uint8, bool) {
	switch p {
	case "tcp":
		return 6, true
	case "udp":
		return 17, true
	case "sctp":
		return 132, true
	}
	return 0, false
}

func protocolName(n uint8) string {
	switch n {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 132:
		return "sctp"
	}
	return strconv.Itoa(int(n))
}
