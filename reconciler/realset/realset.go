// Package realset is one virtual server's real servers, by address and
// port: the reconciler keeps one per virtual server it believes held, and
// a drift check's read makes one per virtual server it reads.
//
// Most virtual servers have a handful of real servers, kept in a slice
// searched in order: a Go map of ten costs ~1.6 KB, three times the slice,
// and the reconciler keeps a set per virtual server (twice, during a drift
// check). Past small members an index is added, so lookups stay O(1) for
// virtual servers with thousands of endpoints.
package realset

import (
	"net/netip"
	"slices"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// Set is a virtual server's real servers. A nil *Set is an empty one to
// read; New makes one to write.
type Set struct {
	list  []objects.RealServer
	index map[netip.AddrPort]int // position in list; nil while small
	// borrowed says list is another's (Borrow), copied before any change.
	borrowed bool
}

// small is the most members a Set searches in order, without an index.
const small = 32

// New takes ownership of list, whose members must be distinct.
func New(list []objects.RealServer) *Set {
	s := &Set{list: list}
	s.reindex()
	return s
}

// Borrow makes the set hold list's members without copying them, if they
// are the set's members now with the same weights: the reconciler believes
// held what it wanted once the kernel holds it, and each real server kept
// twice at rest is ~20 MB at 50k Services. The set's connection counters
// become list's (a belief's are never read: drains read the kernel). list
// must never change; the set copies it before its first change of its own.
func (s *Set) Borrow(list []objects.RealServer) bool {
	if s == nil || len(list) != len(s.list) {
		return false
	}
	for _, rs := range list {
		if cur, ok := s.Get(rs.ID()); !ok || cur.Weight != rs.Weight {
			return false
		}
	}
	s.list, s.borrowed = list, true
	s.reindex()
	return true
}

// own copies a borrowed list before the set changes it.
func (s *Set) own() {
	if s.borrowed {
		s.list, s.borrowed = slices.Clone(s.list), false
	}
}

func (s *Set) reindex() {
	if len(s.list) <= small {
		s.index = nil
		return
	}
	s.index = make(map[netip.AddrPort]int, len(s.list))
	for i, rs := range s.list {
		s.index[rs.ID()] = i
	}
}

func (s *Set) find(id netip.AddrPort) int {
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

// Get returns the member with this address and port, if any.
func (s *Set) Get(id netip.AddrPort) (objects.RealServer, bool) {
	if i := s.find(id); i >= 0 {
		return s.list[i], true
	}
	return objects.RealServer{}, false
}

// Put adds rs or replaces the member with its address and port.
func (s *Set) Put(rs objects.RealServer) {
	s.own()
	if i := s.find(rs.ID()); i >= 0 {
		s.list[i] = rs
		return
	}
	s.list = append(s.list, rs)
	if s.index != nil {
		s.index[rs.ID()] = len(s.list) - 1
	} else if len(s.list) > small {
		s.reindex()
	}
}

// Remove deletes the member with this address and port, if any.
func (s *Set) Remove(id netip.AddrPort) {
	i := s.find(id)
	if i < 0 {
		return
	}
	s.own()
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

// Len is how many members the set has.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.list)
}

// Members returns the real servers, in no particular order; the slice
// must not be changed, nor kept across changes to the set.
func (s *Set) Members() []objects.RealServer {
	if s == nil {
		return nil
	}
	return s.list
}

// SameWeights says whether two sets have the same members with the same
// weights (connection counters aside).
func SameWeights(a, b *Set) bool {
	if a.Len() != b.Len() {
		return false
	}
	for _, rs := range a.Members() {
		if other, ok := b.Get(rs.ID()); !ok || other.Weight != rs.Weight {
			return false
		}
	}
	return true
}
