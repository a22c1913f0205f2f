package ipvs

import (
	"fmt"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// The values the IPVS table holds are package objects': desired state is
// made of them without importing kernel access.
type (
	Protocol      = objects.Protocol
	Key           = objects.Key
	VirtualServer = objects.VirtualServer
	RealServer    = objects.RealServer
)

const (
	TCP               = objects.TCP
	UDP               = objects.UDP
	SCTP              = objects.SCTP
	FlagPersistent    = objects.FlagPersistent
	FlagSchedFallback = objects.FlagSchedFallback
	FlagSchedPort     = objects.FlagSchedPort
	// flagHashed is set by the kernel on every listed service.
	flagHashed uint32 = 0x0002
)

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
