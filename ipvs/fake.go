package ipvs

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
)

// Errors the fake returns where the kernel returns EEXIST / ENOENT / ESRCH.
var (
	ErrExists   = errors.New("object exists")
	ErrNotFound = errors.New("no such object")
)

// Fake is an in-memory IPVS table with kernel semantics, for unit tests.
// TakeOps returns every write that took effect; SetHook sees every
// operation, reads included, to watch, fail or hold it (see oplog).
type Fake struct {
	mu      sync.Mutex
	servers map[Key]*fakeServer
	ops     oplog.Log
	// TableMisses are left out of AllRealServers, as /proc/net/ip_vs may
	// skip a virtual server when the table changes between its pages.
	TableMisses map[Key]bool
}

type fakeServer struct {
	vs   VirtualServer
	real map[netip.AddrPort]RealServer
}

var _ Interface = (*Fake)(nil)

func NewFake() *Fake { return &Fake{servers: map[Key]*fakeServer{}} }

// SetHook makes h see every later operation (see oplog.Hook); nil
// removes it.
func (f *Fake) SetHook(h oplog.Hook) { f.ops.SetHook(h) }

// TakeOps returns the recorded operations and clears the record.
func (f *Fake) TakeOps() []string { return f.ops.Take() }

func (f *Fake) VirtualServers() ([]VirtualServer, error) {
	if _, err := f.ops.Begin("list-vs"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]VirtualServer, 0, len(f.servers))
	for _, s := range f.servers {
		out = append(out, s.vs)
	}
	return out, nil
}

func (f *Fake) GetVirtualServer(k Key) (VirtualServer, bool, error) {
	if _, err := f.ops.Begin("get-vs " + k.String()); err != nil {
		return VirtualServer{}, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[k]
	if !ok {
		return VirtualServer{}, false, nil
	}
	return s.vs, true, nil
}

func (f *Fake) AddVirtualServer(vs VirtualServer) error {
	op := fmt.Sprintf("add-vs %s", vs.Key)
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.servers[vs.Key]; ok {
		return fmt.Errorf("add virtual server %s: %w", vs.Key, ErrExists)
	}
	f.ops.Record(op)
	f.servers[vs.Key] = &fakeServer{vs: vs, real: map[netip.AddrPort]RealServer{}}
	return answer
}

func (f *Fake) UpdateVirtualServer(vs VirtualServer) error {
	op := fmt.Sprintf("update-vs %s", vs.Key)
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[vs.Key]
	if !ok {
		return fmt.Errorf("update virtual server %s: %w", vs.Key, ErrNotFound)
	}
	f.ops.Record(op)
	s.vs = vs
	return answer
}

func (f *Fake) DeleteVirtualServer(k Key) error {
	op := fmt.Sprintf("delete-vs %s", k)
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.servers[k]; !ok {
		return fmt.Errorf("delete virtual server %s: %w", k, ErrNotFound)
	}
	f.ops.Record(op)
	delete(f.servers, k)
	return answer
}

func (f *Fake) RealServers(k Key) ([]RealServer, error) {
	if _, err := f.ops.Begin("list-rs " + k.String()); err != nil {
		return nil, err
	}
	return f.realServers(k), nil
}

func (f *Fake) realServers(k Key) []RealServer {
	f.mu.Lock()
	defer f.mu.Unlock()
	// As the kernel: a missing virtual server has no real servers.
	s, ok := f.servers[k]
	if !ok {
		return nil
	}
	out := make([]RealServer, 0, len(s.real))
	for _, r := range s.real {
		out = append(out, r)
	}
	return out
}

var _ TableReader = (*Fake)(nil)

func (f *Fake) AllRealServers() (map[Key][]RealServer, error) {
	if _, err := f.ops.Begin("read-table"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	var keys []Key
	for k := range f.servers {
		if !f.TableMisses[k] {
			keys = append(keys, k)
		}
	}
	f.mu.Unlock()
	out := map[Key][]RealServer{}
	for _, k := range keys {
		out[k] = f.realServers(k)
	}
	return out, nil
}

func (f *Fake) AddRealServer(k Key, r RealServer) error {
	op := fmt.Sprintf("add-rs %s %s", k, r.ID())
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[k]
	if !ok {
		return fmt.Errorf("add real server to %s: %w", k, ErrNotFound)
	}
	if _, ok := s.real[r.ID()]; ok {
		return fmt.Errorf("add real server %s to %s: %w", r.ID(), k, ErrExists)
	}
	f.ops.Record(op)
	s.real[r.ID()] = RealServer{Address: r.Address, Port: r.Port, Weight: r.Weight}
	return answer
}

func (f *Fake) UpdateRealServer(k Key, r RealServer) error {
	op := fmt.Sprintf("update-rs %s %s weight=%d", k, r.ID(), r.Weight)
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
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
	f.ops.Record(op)
	old.Weight = r.Weight
	s.real[r.ID()] = old
	return answer
}

func (f *Fake) DeleteRealServer(k Key, id netip.AddrPort) error {
	op := fmt.Sprintf("delete-rs %s %s", k, id)
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.servers[k]
	if !ok {
		return fmt.Errorf("delete real server of %s: %w", k, ErrNotFound)
	}
	if _, ok := s.real[id]; !ok {
		return fmt.Errorf("delete real server %s of %s: %w", id, k, ErrNotFound)
	}
	f.ops.Record(op)
	delete(s.real, id)
	return answer
}

// SetConnections sets a real server's connection counters, as traffic would.
func (f *Fake) SetConnections(k Key, id netip.AddrPort, active, inactive int32) {
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
