package ipset

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
)

// Fake is an in-memory ipset store with kernel semantics: entries go only
// into sets that exist. TakeOps returns every write that took effect;
// SetHook sees every operation, reads included (see oplog).
type Fake struct {
	mu   sync.Mutex
	sets map[string]*fakeSet
	ops  oplog.Log
}

type fakeSet struct {
	def     Set
	entries map[Entry]bool
}

var _ Interface = (*Fake)(nil)

func NewFake() *Fake { return &Fake{sets: map[string]*fakeSet{}} }

func (f *Fake) EnsureSet(s Set) error {
	if _, err := f.ops.Begin("create-set " + s.Name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.sets[s.Name]; !ok {
		f.sets[s.Name] = &fakeSet{def: s, entries: map[Entry]bool{}}
	}
	return nil
}

func (f *Fake) set(name string) (*fakeSet, error) {
	s, ok := f.sets[name]
	if !ok {
		return nil, fmt.Errorf("ipset %s: %w", name, ErrNoSet)
	}
	return s, nil
}

func (f *Fake) Entries(name string) ([]Entry, error) {
	if _, err := f.ops.Begin("list-entries " + name); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.set(name)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(s.entries))
	for e := range s.entries {
		out = append(out, e)
	}
	return out, nil
}

func (f *Fake) Count(name string) (int, error) {
	if _, err := f.ops.Begin("count " + name); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.set(name)
	if err != nil {
		return 0, err
	}
	return len(s.entries), nil
}

func (f *Fake) Has(name string, e Entry) (bool, error) {
	if _, err := f.ops.Begin("has " + name + " " + e.String()); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.set(name)
	if err != nil {
		return false, err
	}
	return s.entries[e], nil
}

func (f *Fake) AddEntries(name string, entries []Entry) []error {
	return each(entries, func(e Entry) error { return f.AddEntry(name, e) })
}

func (f *Fake) DeleteEntries(name string, entries []Entry) []error {
	return each(entries, func(e Entry) error { return f.DeleteEntry(name, e) })
}

func each(entries []Entry, fn func(Entry) error) []error {
	errs := make([]error, len(entries))
	for i, e := range entries {
		errs[i] = fn(e)
	}
	return errs
}

func (f *Fake) AddEntry(name string, e Entry) error {
	op := fmt.Sprintf("add-entry %s %s", name, e)
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.set(name)
	if err != nil {
		return err
	}
	if !s.entries[e] && s.def.Type != BitmapPort && len(s.entries) >= int(s.def.MaxElem) {
		return fmt.Errorf("add %s to ipset %s: set is full", e, name)
	}
	f.ops.Record(op)
	s.entries[e] = true
	return answer
}

func (f *Fake) Capacity(name string) (int, error) {
	if _, err := f.ops.Begin("capacity " + name); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.set(name)
	if err != nil {
		return 0, err
	}
	if s.def.Type == BitmapPort {
		return 65536, nil
	}
	return int(s.def.MaxElem), nil
}

func (f *Fake) Grow(def Set, maxElem uint32) error {
	op := fmt.Sprintf("grow %s %d", def.Name, maxElem)
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.set(def.Name)
	if err != nil {
		return err
	}
	f.ops.Record(op)
	s.def.MaxElem = maxElem
	return answer
}

func (f *Fake) DeleteEntry(name string, e Entry) error {
	op := fmt.Sprintf("delete-entry %s %s", name, e)
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.set(name)
	if err != nil {
		return err
	}
	f.ops.Record(op)
	delete(s.entries, e)
	return answer
}

// SetHook makes h see every later operation (see oplog.Hook); nil
// removes it.
func (f *Fake) SetHook(h oplog.Hook) { f.ops.SetHook(h) }

// TakeOps returns the recorded operations and clears the record.
func (f *Fake) TakeOps() []string { return f.ops.Take() }

// Dump prints non-empty sets as `ipset save` would list their entries, sorted.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lines []string
	for name, s := range f.sets {
		for e := range s.entries {
			lines = append(lines, fmt.Sprintf("add %s %s", name, e))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// SetNames lists the sets that exist, sorted.
func (f *Fake) SetNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var names []string
	for n := range f.sets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
