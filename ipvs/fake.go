package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
)

// Errors the fake returns where the kernel returns EEXIST / ENOENT / ESRCH.
var (
	ErrExists   = errors.New("object exists")
	ErrNotFound = errors.New("no such object")
)

// Fake is an in-memory IPVS table with kernel semantics, for unit tests.
// TakeOps returns every mutating call so tests can assert the work done.
type Fake struct {
	mu      sync.Mutex
	servers map[Key]*fakeServer
	ops     oplog.Log
	// FailNext, when set, makes the next mutating call whose op string
	// starts with it fail once.
	FailNext string
	// LoseAcks, when set, makes every write whose op string starts with it
	// take effect but answer nlbatch.ErrOutcomeUnknown, as when a batch's
	// acknowledgements are lost.
	LoseAcks string
	// readErr, when set (FailReads), is what every read returns.
	readErr error
	// TableMisses are left out of AllRealServers, as /proc/net/ip_vs may
	// skip a virtual server when the table changes between its pages.
	TableMisses map[Key]bool
	// TableReads counts calls to AllRealServers.
	TableReads int
}

type fakeServer struct {
	vs   VirtualServer
	real map[netip.AddrPort]RealServer
}

var _ Interface = (*Fake)(nil)

func NewFake() *Fake { return &Fake{servers: map[Key]*fakeServer{}} }

func (f *Fake) op(format string, args ...any) error {
	s := fmt.Sprintf(format, args...)
	if f.FailNext != "" && strings.HasPrefix(s, f.FailNext) {
		f.FailNext = ""
		return fmt.Errorf("%s: injected failure", s)
	}
	return f.ops.Record(s)
}

// answer is what a write that took effect answers: nil, or an unknown
// outcome if its acknowledgement is to be lost.
func (f *Fake) answer(op string) error {
	if f.LoseAcks != "" && strings.HasPrefix(op, f.LoseAcks) {
		return fmt.Errorf("%s: %w", op, nlbatch.ErrOutcomeUnknown)
	}
	return nil
}

// FailReads makes every read fail with err, as a kernel whose dumps fail,
// until FailReads(nil).
func (f *Fake) FailReads(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.readErr = err
}

// Refuse makes every write whose op string starts with prefix fail, until
// Refuse(""), as the kernel refuses an object it will not take.
func (f *Fake) Refuse(prefix string) { f.ops.Refuse(prefix) }

// TakeOps returns the recorded operations and clears the record.
func (f *Fake) TakeOps() []string { return f.ops.Take() }

func (f *Fake) VirtualServers() ([]VirtualServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, f.readErr
	}
	out := make([]VirtualServer, 0, len(f.servers))
	for _, s := range f.servers {
		out = append(out, s.vs)
	}
	return out, nil
}

func (f *Fake) GetVirtualServer(k Key) (VirtualServer, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return VirtualServer{}, false, f.readErr
	}
	s, ok := f.servers[k]
	if !ok {
		return VirtualServer{}, false, nil
	}
	return s.vs, true, nil
}

func (f *Fake) AddVirtualServer(vs VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.servers[vs.Key]; ok {
		return fmt.Errorf("add virtual server %s: %w", vs.Key, ErrExists)
	}
	op := fmt.Sprintf("add-vs %s", vs.Key)
	if err := f.op("%s", op); err != nil {
		return err
	}
	f.servers[vs.Key] = &fakeServer{vs: vs, real: map[netip.AddrPort]RealServer{}}
	return f.answer(op)
}

func (f *Fake) UpdateVirtualServer(vs VirtualServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[vs.Key]
	if !ok {
		return fmt.Errorf("update virtual server %s: %w", vs.Key, ErrNotFound)
	}
	op := fmt.Sprintf("update-vs %s", vs.Key)
	if err := f.op("%s", op); err != nil {
		return err
	}
	s.vs = vs
	return f.answer(op)
}

func (f *Fake) DeleteVirtualServer(k Key) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.servers[k]; !ok {
		return fmt.Errorf("delete virtual server %s: %w", k, ErrNotFound)
	}
	op := fmt.Sprintf("delete-vs %s", k)
	if err := f.op("%s", op); err != nil {
		return err
	}
	delete(f.servers, k)
	return f.answer(op)
}

func (f *Fake) RealServers(k Key) ([]RealServer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return nil, f.readErr
	}
	// As the kernel: a missing virtual server has no real servers.
	s, ok := f.servers[k]
	if !ok {
		return nil, nil
	}
	out := make([]RealServer, 0, len(s.real))
	for _, r := range s.real {
		out = append(out, r)
	}
	return out, nil
}

var _ TableReader = (*Fake)(nil)

func (f *Fake) AllRealServers() (map[Key][]RealServer, error) {
	f.mu.Lock()
	f.TableReads++
	if err := f.readErr; err != nil {
		f.mu.Unlock()
		return nil, err
	}
	var keys []Key
	for k := range f.servers {
		if !f.TableMisses[k] {
			keys = append(keys, k)
		}
	}
	f.mu.Unlock()
	out := map[Key][]RealServer{}
	for _, k := range keys {
		out[k], _ = f.RealServers(k)
	}
	return out, nil
}

func (f *Fake) AddRealServer(k Key, r RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[k]
	if !ok {
		return fmt.Errorf("add real server to %s: %w", k, ErrNotFound)
	}
	if _, ok := s.real[r.ID()]; ok {
		return fmt.Errorf("add real server %s to %s: %w", r.ID(), k, ErrExists)
	}
	op := fmt.Sprintf("add-rs %s %s", k, r.ID())
	if err := f.op("%s", op); err != nil {
		return err
	}
	s.real[r.ID()] = RealServer{Address: r.Address, Port: r.Port, Weight: r.Weight}
	return f.answer(op)
}

func (f *Fake) UpdateRealServer(k Key, r RealServer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[k]
	if !ok {
		return fmt.Errorf("update real server of %s: %w", k, ErrNotFound)
	}
	old, ok := s.real[r.ID()]
	if !ok {
		return fmt.Errorf("update real server %s of %s: %w", r.ID(), k, ErrNotFound)
	}
	op := fmt.Sprintf("update-rs %s %s weight=%d", k, r.ID(), r.Weight)
	if err := f.op("%s", op); err != nil {
		return err
	}
	old.Weight = r.Weight
	s.real[r.ID()] = old
	return f.answer(op)
}

func (f *Fake) DeleteRealServer(k Key, id netip.AddrPort) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[k]
	if !ok {
		return fmt.Errorf("delete real server of %s: %w", k, ErrNotFound)
	}
	if _, ok := s.real[id]; !ok {
		return fmt.Errorf("delete real server %s of %s: %w", id, k, ErrNotFound)
	}
	op := fmt.Sprintf("delete-rs %s %s", k, id)
	if err := f.op("%s", op); err != nil {
		return err
	}
	delete(s.real, id)
	return f.answer(op)
}

// SetConnections sets a real server's connection counters, as traffic would.
func (f *Fake) SetConnections(k Key, id netip.AddrPort, active, inactive int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.servers[k]; ok {
		if r, ok := s.real[id]; ok {
			r.ActiveConns, r.InactiveConns = active, inactive
			s.real[id] = r
		}
	}
}

// Dump prints the table one object per line, sorted, in the spirit of ipvsadm -Sn.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for _, s := range f.servers {
		v := fmt.Sprintf("-A %s -s %s", s.vs.Key, s.vs.Scheduler)
		if s.vs.Flags&FlagPersistent != 0 {
			v += fmt.Sprintf(" -p %d", s.vs.Timeout)
		}
		lines = append(lines, v)
		for _, r := range s.real {
			lines = append(lines, fmt.Sprintf("-a %s -r %s -w %d", s.vs.Key, r.ID(), r.Weight))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Write applies the ops one by one, like the kernel handles a batch.
func (f *Fake) Write(ops []Op) []error {
	errs := make([]error, len(ops))
	for i, op := range ops {
		switch op.Kind {
		case AddVS:
			errs[i] = f.AddVirtualServer(op.VS)
		case UpdateVS:
			errs[i] = f.UpdateVirtualServer(op.VS)
		case DeleteVS:
			errs[i] = f.DeleteVirtualServer(op.VS.Key)
		case AddRS:
			errs[i] = f.AddRealServer(op.VS.Key, op.RS)
		case UpdateRS:
			errs[i] = f.UpdateRealServer(op.VS.Key, op.RS)
		case DeleteRS:
			errs[i] = f.DeleteRealServer(op.VS.Key, op.RS.ID())
		default:
			errs[i] = fmt.Errorf("unknown op %d", op.Kind)
		}
	}
	return errs
}
