package reconciler

import (
	"net/netip"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// realSet is one virtual server's real servers, by address and port. Most
// virtual servers have a handful, kept in a slice searched in order: a Go
// map of ten costs ~1.6 KB, three times the slice, and the reconciler keeps
// a set per virtual server (twice, during a drift check). Past
// smallRealSet members an index is added, so lookups stay O(1) for
// virtual servers with thousands of endpoints.
type realSet struct {
	list  []ipvs.RealServer
	index map[netip.AddrPort]int // position in list; nil while small
}

const smallRealSet = 32

// newRealSet takes ownership of list, whose members must be distinct.
func newRealSet(list []ipvs.RealServer) *realSet {
	s := &realSet{list: list}
	s.reindex()
	return s
}

func (s *realSet) reindex() {
	if len(s.list) <= smallRealSet {
		s.index = nil
		return
	}
	s.index = make(map[netip.AddrPort]int, len(s.list))
	for i, rs := range s.list {
		s.index[rs.ID()] = i
	}
}

func (s *realSet) find(id netip.AddrPort) int {
	if s == nil {
		return -1
	}
	if s.index != nil {
		if i, ok := s.index[id]; ok {
			return i
		}
		return -1
	}
	for i := range s.list {
		if s.list[i].Address == id.Addr() && s.list[i].Port == id.Port() {
			return i
		}
	}
	return -1
}

func (s *realSet) get(id netip.AddrPort) (ipvs.RealServer, bool) {
	if i := s.find(id); i >= 0 {
		return s.list[i], true
	}
	return ipvs.RealServer{}, false
}

// put adds rs or replaces the member with its address and port.
func (s *realSet) put(rs ipvs.RealServer) {
	if i := s.find(rs.ID()); i >= 0 {
		s.list[i] = rs
		return
	}
	s.list = append(s.list, rs)
	if s.index != nil {
		s.index[rs.ID()] = len(s.list) - 1
	} else if len(s.list) > smallRealSet {
		s.reindex()
	}
}

// remove deletes the member with this address and port, if any.
func (s *realSet) remove(id netip.AddrPort) {
	i := s.find(id)
	if i < 0 {
		return
	}
	last := len(s.list) - 1
	s.list[i] = s.list[last]
	s.list = s.list[:last]
	if s.index != nil {
		delete(s.index, id)
		if i < last {
			s.index[s.list[i].ID()] = i
		}
	}
}

func (s *realSet) len() int {
	if s == nil {
		return 0
	}
	return len(s.list)
}

// members returns the real servers, in no particular order; the slice
// must not be kept across changes to the set.
func (s *realSet) members() []ipvs.RealServer {
	if s == nil {
		return nil
	}
	return s.list
}

// sameWeights says whether two sets have the same members with the same
// weights (connection counters aside).
func sameWeights(a, b *realSet) bool {
	if a.len() != b.len() {
		return false
	}
	for _, rs := range a.members() {
		if other, ok := b.get(rs.ID()); !ok || other.Weight != rs.Weight {
			return false
		}
	}
	return true
}
