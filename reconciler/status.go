package reconciler

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
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

// Retry delays of a failed object: retryFirst after the first failure,
// doubling with each further one, up to its table's max (the sync period).
const retryFirst = time.Second

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

// StatusTable holds the failed objects of one kind. Keys are retried alone,
// with a delay that doubles per failure, while every other key is written.
type StatusTable[K comparable] struct {
	kind    Kind
	of      string        // what reports put before a key: a real server's virtual server
	max     time.Duration // the longest retry delay
	failed  map[K]*Failure
	reports []Report
}

func NewStatusTable[K comparable](kind Kind, max time.Duration) StatusTable[K] {
	return StatusTable[K]{kind: kind, max: max, failed: map[K]*Failure{}}
}

// Waiting says whether k failed and its retry is not due yet.
func (s *StatusTable[K]) Waiting(k K, now time.Time) bool {
	f := s.failed[k]
	return f != nil && now.Before(f.RetryAt)
}

// Fail records a failed write of k, wanted by owner (zero if unwanted).
func (s *StatusTable[K]) Fail(k K, err error, now time.Time, owner types.NamespacedName) {
	f := s.failed[k]
	if f == nil {
		f = &Failure{}
		s.failed[k] = f
	}
	f.Err = err
	f.Attempts++
	f.RetryAt = now.Add(min(s.max, retryFirst<<min(f.Attempts-1, 20)))
	if f.Attempts == 1 {
		s.reports = append(s.reports, Report{Kind: s.kind, Object: s.of + fmt.Sprint(k), Owner: owner, Err: err, Attempts: 1})
	}
}

// OK records that k is as desired: written, or nothing left to write.
func (s *StatusTable[K]) OK(k K) {
	if len(s.failed) == 0 {
		return
	}
	if f := s.failed[k]; f != nil {
		delete(s.failed, k)
		s.reports = append(s.reports, Report{Kind: s.kind, Object: s.of + fmt.Sprint(k), Attempts: f.Attempts})
	}
}

// Failing says whether k's last write failed.
func (s *StatusTable[K]) Failing(k K) bool { return s.failed[k] != nil }

// Failure is k's status, if its last write failed.
func (s *StatusTable[K]) Failure(k K) (Failure, bool) {
	if f := s.failed[k]; f != nil {
		return *f, true
	}
	return Failure{}, false
}

// Count is how many keys are failed.
func (s *StatusTable[K]) Count() int { return len(s.failed) }

// PutOff moves a failed k's retry the longest delay from now: a retry of
// it is running, and no other may start meanwhile.
func (s *StatusTable[K]) PutOff(k K, now time.Time) {
	if f := s.failed[k]; f != nil {
		f.RetryAt = now.Add(s.max)
	}
}

// RetryNow makes a failed k due at once: what is wanted of it changed.
func (s *StatusTable[K]) RetryNow(k K) {
	if f := s.failed[k]; f != nil {
		f.RetryAt = dueNow
	}
}

// RetryAllNow makes every failed key due at once.
func (s *StatusTable[K]) RetryAllNow() {
	for _, f := range s.failed {
		f.RetryAt = dueNow
	}
}

// NextRetry is the earliest retry due, or zero if nothing failed.
func (s *StatusTable[K]) NextRetry() time.Time {
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

func (s *StatusTable[K]) TakeReports() []Report {
	r := s.reports
	s.reports = nil
	return r
}

// realServerStatus holds the failed real servers by virtual server, so a
// virtual server's are found without a walk over every failure.
type realServerStatus struct {
	byVS    map[ipvs.Key]*StatusTable[netip.AddrPort]
	max     time.Duration
	reports []Report
}

func (s *realServerStatus) waiting(k ipvs.Key, id netip.AddrPort, now time.Time) bool {
	t := s.byVS[k]
	return t != nil && t.Waiting(id, now)
}

func (s *realServerStatus) fail(k ipvs.Key, id netip.AddrPort, err error, now time.Time, owner types.NamespacedName) {
	t := s.byVS[k]
	if t == nil {
		nt := NewStatusTable[netip.AddrPort](KindRealServer, s.max)
		nt.of = k.String() + " "
		t = &nt
		s.byVS[k] = t
	}
	t.Fail(id, err, now, owner)
	s.reports = append(s.reports, t.TakeReports()...)
}

func (s *realServerStatus) ok(k ipvs.Key, id netip.AddrPort) {
	t := s.byVS[k]
	if t == nil {
		return
	}
	t.OK(id)
	s.reports = append(s.reports, t.TakeReports()...)
	if len(t.failed) == 0 {
		delete(s.byVS, k)
	}
}

// of returns virtual server k's failed real servers, or nil.
func (s *realServerStatus) of(k ipvs.Key) *StatusTable[netip.AddrPort] { return s.byVS[k] }

// forget drops virtual server k's failures, silently: they went with it.
func (s *realServerStatus) forget(k ipvs.Key) { delete(s.byVS, k) }

func (s *realServerStatus) count() int {
	n := 0
	for _, t := range s.byVS {
		n += len(t.failed)
	}
	return n
}

func (s *realServerStatus) nextRetry() time.Time {
	var next time.Time
	for _, t := range s.byVS {
		next = Earliest(next, t.NextRetry())
	}
	return next
}

// takeReports returns the status changes since the last call, of every kind.
func (r *Reconciler) takeReports() []Report {
	out := r.vs.status.TakeReports()
	out = append(out, r.rsStatus.reports...)
	r.rsStatus.reports = nil
	out = append(out, r.addr.status.TakeReports()...)
	return append(out, r.entry.status.TakeReports()...)
}

// FailedObject is an object whose last write failed.
type FailedObject struct {
	Kind   Kind
	Object string
	Failure
}

// Failed lists the failed objects, sorted by kind and name.
func (r *Reconciler) Failed() []FailedObject {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.vs.status.failures(nil)
	for _, t := range r.rsStatus.byVS {
		out = t.failures(out)
	}
	out = r.addr.status.failures(out)
	out = r.entry.status.failures(out)
	slices.SortFunc(out, func(a, b FailedObject) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Object, b.Object))
	})
	return out
}

// failures appends the table's failed objects to out.
func (s *StatusTable[K]) failures(out []FailedObject) []FailedObject {
	for k, f := range s.failed {
		out = append(out, FailedObject{Kind: s.kind, Object: s.of + fmt.Sprint(k), Failure: *f})
	}
	return out
}

// failedCounts says how many objects of each kind have failed.
func (r *Reconciler) failedCounts() map[Kind]int {
	return map[Kind]int{
		KindVirtualServer: len(r.vs.status.failed), KindRealServer: r.rsStatus.count(),
		KindAddress: len(r.addr.status.failed), KindSetEntry: len(r.entry.status.failed),
	}
}

// nextRetry is when the earliest failed object is due, or zero if none failed.
func (r *Reconciler) nextRetry() time.Time {
	return Earliest(r.vs.status.NextRetry(), r.rsStatus.nextRetry(), r.addr.status.NextRetry(), r.entry.status.NextRetry())
}
