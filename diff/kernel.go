package diff

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// IPVS reads the kernel's IPVS table and records writes as rows.
type IPVS struct {
	ipvs.Interface
	Rows *Rows
}

func (t IPVS) Write(ops []ipvs.Op) []error {
	for _, op := range ops {
		t.Rows.add(t.row(op))
	}
	return make([]error, len(ops))
}

func (t IPVS) row(op ipvs.Op) Row {
	vs, rs := op.VS.Key.String(), op.VS.Key.String()+" "+netip.AddrPortFrom(op.RS.Address, op.RS.Port).String()
	switch op.Kind {
	case ipvs.AddVS:
		return Row{Kind: KindVirtualServer, Change: Missing, Object: vs, Want: describeVS(op.VS)}
	case ipvs.DeleteVS:
		return Row{Kind: KindVirtualServer, Change: Extra, Object: vs}
	case ipvs.UpdateVS:
		have := "unreadable"
		if cur, ok, err := t.GetVirtualServer(op.VS.Key); err == nil && ok {
			have = describeVS(cur)
		}
		return Row{Kind: KindVirtualServer, Change: Wrong, Object: vs, Want: describeVS(op.VS), Have: have}
	case ipvs.AddRS:
		return Row{Kind: KindRealServer, Change: Missing, Object: rs, Want: fmt.Sprintf("weight %d", op.RS.Weight)}
	case ipvs.DeleteRS:
		return Row{Kind: KindRealServer, Change: Extra, Object: rs}
	default: // UpdateRS
		have := "unreadable"
		if reals, err := t.RealServers(op.VS.Key); err == nil {
			for _, cur := range reals {
				if cur.ID() == op.RS.ID() {
					have = fmt.Sprintf("weight %d", cur.Weight)
				}
			}
		}
		// A wanted real server has weight 1: setting 0 starts a drain.
		if op.RS.Weight == 0 {
			return Row{Kind: KindRealServer, Change: Draining, Object: rs, Want: "weight 0 until its connections end", Have: have}
		}
		return Row{Kind: KindRealServer, Change: Wrong, Object: rs, Want: fmt.Sprintf("weight %d", op.RS.Weight), Have: have}
	}
}

func describeVS(vs ipvs.VirtualServer) string {
	return fmt.Sprintf("scheduler %s flags %#x timeout %d", vs.Scheduler, vs.Flags, vs.Timeout)
}

// Links reads kube-ipvs0's addresses and records writes as rows.
type Links struct {
	dummyiface.Interface
	Rows *Rows
}

func (l *Links) EnsureLink() error {
	ok, err := l.Exists()
	if err != nil {
		return err
	}
	if !ok {
		l.Rows.add(Row{Kind: KindLink, Change: Missing, Object: "kube-ipvs0"})
	}
	return nil
}

func (l *Links) AddAddresses(addrs []netip.Addr) []error {
	return l.record(addrs, Missing)
}

func (l *Links) DeleteAddresses(addrs []netip.Addr) []error {
	return l.record(addrs, Extra)
}

func (l *Links) record(addrs []netip.Addr, c Change) []error {
	for _, a := range addrs {
		l.Rows.add(Row{Kind: KindAddress, Change: c, Object: a.String()})
	}
	return make([]error, len(addrs))
}

// Sets reads the kernel's ipsets and records writes as rows. A missing set
// holds no entry; a set that cannot be read fails the setup, and with it
// the diff.
type Sets struct {
	ipset.Interface
	Rows    *Rows
	mu      sync.Mutex
	missing map[string]bool
}

func (s *Sets) EnsureSet(set ipset.Set) error {
	_, err := s.Interface.Count(set.Name)
	if !errors.Is(err, ipset.ErrNoSet) {
		return err // nil: the set is there
	}
	s.Rows.add(Row{Kind: KindSet, Change: Missing, Object: set.Name})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.missing == nil {
		s.missing = map[string]bool{}
	}
	s.missing[set.Name] = true
	return nil
}

func (s *Sets) isMissing(set string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.missing[set]
}

func (s *Sets) Entries(set string) ([]ipset.Entry, error) {
	if s.isMissing(set) {
		return nil, nil
	}
	return s.Interface.Entries(set)
}

func (s *Sets) Count(set string) (int, error) {
	if s.isMissing(set) {
		return 0, nil
	}
	return s.Interface.Count(set)
}

func (s *Sets) Has(set string, e ipset.Entry) (bool, error) {
	if s.isMissing(set) {
		return false, nil
	}
	return s.Interface.Has(set, e)
}

func (s *Sets) Capacity(set string) (int, error) {
	if s.isMissing(set) {
		return 1 << 31, nil // what a new set would be made to hold is not a difference
	}
	return s.Interface.Capacity(set)
}

func (s *Sets) Grow(set ipset.Set, maxElem uint32) error {
	have, _ := s.Interface.Capacity(set.Name)
	s.Rows.add(Row{Kind: KindSet, Change: Wrong, Object: set.Name, Want: fmt.Sprintf("maxelem %d", maxElem), Have: fmt.Sprintf("maxelem %d", have)})
	return nil
}

func (s *Sets) AddEntries(set string, entries []ipset.Entry) []error {
	return s.record(set, entries, Missing)
}

func (s *Sets) DeleteEntries(set string, entries []ipset.Entry) []error {
	return s.record(set, entries, Extra)
}

func (s *Sets) record(set string, entries []ipset.Entry, c Change) []error {
	for _, e := range entries {
		s.Rows.add(Row{Kind: KindSetEntry, Change: c, Object: set + " " + e.String()})
	}
	return make([]error, len(entries))
}
