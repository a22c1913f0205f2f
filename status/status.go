// Package status keeps the failed objects of a kind of kernel object: each
// is retried alone, after a delay that doubles per failure, and its first
// failure and its recovery are reported, the two moments an operator hears
// of. The reconciler keeps a table per kind; the proxier one for setup.
package status

import (
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Kind names a kind of kernel object, as the failed-objects gauge
// labels it.
type Kind string

const (
	KindVirtualServer Kind = "virtual_server"
	KindRealServer    Kind = "real_server"
	KindAddress       Kind = "address"
	KindSetEntry      Kind = "set_entry"
	// KindSetup is what every sync relies on: the dummy link, the ipsets
	// and the iptables payload.
	KindSetup Kind = "setup"
)

// Kinds lists every kind, so the gauge shows zeros too.
var Kinds = []Kind{KindVirtualServer, KindRealServer, KindAddress, KindSetEntry, KindSetup}

// Retry delays of a failed object: RetryFirst after the first failure,
// doubling with each further one, up to its table's max (the sync period).
const RetryFirst = time.Second

// dueNow is the retry time of a failed object that is due at once: not the
// zero time, which nextRetry reserves for "nothing failed".
var dueNow = time.Unix(0, 0)

// Failure is the status of an object whose last write failed. An object
// without one is done, or pending while its key is dirty.
type Failure struct {
	Err      error
	Attempts int
	RetryAt  time.Time
}

// Report tells of an object's first failure (err set) or of its
// recovery (err nil), the two moments an operator hears of; retries between
// them are silent.
type Report struct {
	Kind     Kind
	Object   string
	Owner    types.NamespacedName // a Service that wants it; zero if none does
	Err      error
	Attempts int
}

// Table holds the failed objects of one kind. Keys are retried alone,
// with a delay that doubles per failure, while every other key is written.
type Table[K comparable] struct {
	kind   Kind
	of     string        // what names put before a key: a real server's virtual server
	max    time.Duration // the longest retry delay
	failed map[K]*Failure
	// reports is where the table's reports go: its own list, or one that
	// tables of the same kind share (a real server's, per virtual server).
	reports *[]Report
}

func NewTable[K comparable](kind Kind, max time.Duration) Table[K] {
	return Table[K]{kind: kind, max: max, failed: map[K]*Failure{}, reports: new([]Report)}
}

// Waiting says whether k failed and its retry is not due yet.
func (s *Table[K]) Waiting(k K, now time.Time) bool {
	f := s.failed[k]
	return f != nil && now.Before(f.RetryAt)
}

// Fail records a failed write of k, wanted by owner (zero if unwanted).
func (s *Table[K]) Fail(k K, err error, now time.Time, owner types.NamespacedName) {
	f := s.failed[k]
	if f == nil {
		f = &Failure{}
		s.failed[k] = f
	}
	f.Err = err
	f.Attempts++
	f.RetryAt = now.Add(min(s.max, RetryFirst<<min(f.Attempts-1, 20)))
	if f.Attempts == 1 {
		*s.reports = append(*s.reports, Report{Kind: s.kind, Object: s.of + fmt.Sprint(k), Owner: owner, Err: err, Attempts: 1})
	}
}

// OK records that k is as desired: written, or nothing left to write.
func (s *Table[K]) OK(k K) {
	if len(s.failed) == 0 {
		return
	}
	if f := s.failed[k]; f != nil {
		delete(s.failed, k)
		*s.reports = append(*s.reports, Report{Kind: s.kind, Object: s.of + fmt.Sprint(k), Attempts: f.Attempts})
	}
}

// Failing says whether k's last write failed.
func (s *Table[K]) Failing(k K) bool { return s.failed[k] != nil }

// Failure is k's status, if its last write failed.
func (s *Table[K]) Failure(k K) (Failure, bool) {
	if f := s.failed[k]; f != nil {
		return *f, true
	}
	return Failure{}, false
}

// Keys are the failed keys; the caller may mark them OK as it goes.
func (s *Table[K]) Keys() iter.Seq[K] { return maps.Keys(s.failed) }

// Count is how many keys are failed.
func (s *Table[K]) Count() int { return len(s.failed) }

// PutOff moves a failed k's retry the longest delay from now: a retry of
// it is running, and no other may start meanwhile.
func (s *Table[K]) PutOff(k K, now time.Time) {
	if f := s.failed[k]; f != nil {
		f.RetryAt = now.Add(s.max)
	}
}

// RetryNow makes a failed k due at once: what is wanted of it changed.
func (s *Table[K]) RetryNow(k K) {
	if f := s.failed[k]; f != nil {
		f.RetryAt = dueNow
	}
}

// RetryAllNow makes every failed key due at once.
func (s *Table[K]) RetryAllNow() {
	for _, f := range s.failed {
		f.RetryAt = dueNow
	}
}

// NextRetry is the earliest retry due, or zero if nothing failed.
func (s *Table[K]) NextRetry() time.Time {
	var next time.Time
	for _, f := range s.failed {
		next = Earliest(next, f.RetryAt)
	}
	return next
}

// Earliest is the earliest of the times that are not zero, or zero.
func Earliest(times ...time.Time) time.Time {
	var first time.Time
	for _, t := range times {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

// NewMemberTable returns a table for the members of one object (the real
// servers of a virtual server): of goes before each key in names, and the
// reports go to the list that all members' tables share.
func NewMemberTable[K comparable](kind Kind, of string, max time.Duration, reports *[]Report) *Table[K] {
	return &Table[K]{kind: kind, of: of + " ", max: max, failed: map[K]*Failure{}, reports: reports}
}

// TakeReports returns the reports since the last call.
func (s *Table[K]) TakeReports() []Report {
	r := *s.reports
	*s.reports = nil
	return r
}

// Object is an object whose last write failed.
type Object struct {
	Kind   Kind
	Object string
	Failure
}

// objectJSON is how an Object reads as JSON.
type objectJSON struct {
	Kind     Kind      `json:"kind"`
	Object   string    `json:"object"`
	Error    string    `json:"error"`
	Attempts int       `json:"attempts"`
	RetryAt  time.Time `json:"retryAt"`
}

func (o Object) MarshalJSON() ([]byte, error) {
	return json.Marshal(objectJSON{Kind: o.Kind, Object: o.Object, Error: o.Err.Error(), Attempts: o.Attempts, RetryAt: o.RetryAt})
}

// UnmarshalJSON reads an Object as MarshalJSON writes it, its error as text.
func (o *Object) UnmarshalJSON(b []byte) error {
	var j objectJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*o = Object{Kind: j.Kind, Object: j.Object, Failure: Failure{Err: errors.New(j.Error), Attempts: j.Attempts, RetryAt: j.RetryAt}}
	return nil
}

// AppendFailed appends the table's failed objects to out.
func (s *Table[K]) AppendFailed(out []Object) []Object {
	for k, f := range s.failed {
		out = append(out, Object{Kind: s.kind, Object: s.of + fmt.Sprint(k), Failure: *f})
	}
	return out
}
