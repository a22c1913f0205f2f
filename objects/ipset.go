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
