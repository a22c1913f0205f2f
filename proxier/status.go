package proxier

import (
	"fmt"
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// objectKind names a kind of kernel object, as the failed-objects gauge
// labels it.
type objectKind string

const (
	kindVirtualServer objectKind = "virtual_server"
	kindRealServer    objectKind = "real_server"
	kindAddress       objectKind = "address"
	kindSetEntry      objectKind = "set_entry"
	// kindSetup is what every sync relies on: the dummy link, the ipsets
	// and the iptables payload.
	kindSetup objectKind = "setup"
)

// objectKinds lists every kind, so the gauge shows zeros too.
var objectKinds = []objectKind{kindVirtualServer, kindRealServer, kindAddress, kindSetEntry, kindSetup}

// Retry delays of a failed object: retryFirst after the first failure,
// doubling with each further one, up to its table's max (the sync period).
const retryFirst = time.Second

// dueNow is the retry time of a failed object that is due at once: not the
// zero time, which nextRetry reserves for "nothing failed".
var dueNow = time.Unix(0, 0)

// failure is the status of an object whose last write failed. An object
// without one is done, or pending while its key is dirty.
type failure struct {
	err      error
	attempts int
	retryAt  time.Time
}

// objectReport tells of an object's first failure (err set) or of its
// recovery (err nil), the two moments an operator hears of; retries between
// them are silent.
type objectReport struct {
	kind     objectKind
	object   string
	owner    types.NamespacedName // a Service that wants it; zero if none does
	err      error
	attempts int
}

// statusTable holds the failed objects of one kind. Keys are retried alone,
// with a delay that doubles per failure, while every other key is written.
type statusTable[K comparable] struct {
	kind    objectKind
	of      string        // what reports put before a key: a real server's virtual server
	max     time.Duration // the longest retry delay
	failed  map[K]*failure
	reports []objectReport
}

func newStatusTable[K comparable](kind objectKind, max time.Duration) statusTable[K] {
	return statusTable[K]{kind: kind, max: max, failed: map[K]*failure{}}
}

// waiting says whether k failed and its retry is not due yet.
func (s *statusTable[K]) waiting(k K, now time.Time) bool {
	f := s.failed[k]
	return f != nil && now.Before(f.retryAt)
}

// fail records a failed write of k, wanted by owner (zero if unwanted).
func (s *statusTable[K]) fail(k K, err error, now time.Time, owner types.NamespacedName) {
	f := s.failed[k]
	if f == nil {
		f = &failure{}
		s.failed[k] = f
	}
	f.err = err
	f.attempts++
	f.retryAt = now.Add(min(s.max, retryFirst<<min(f.attempts-1, 20)))
	if f.attempts == 1 {
		s.reports = append(s.reports, objectReport{kind: s.kind, object: s.of + fmt.Sprint(k), owner: owner, err: err, attempts: 1})
	}
}

// ok records that k is as desired: written, or nothing left to write.
func (s *statusTable[K]) ok(k K) {
	if len(s.failed) == 0 {
		return
	}
	if f := s.failed[k]; f != nil {
		delete(s.failed, k)
		s.reports = append(s.reports, objectReport{kind: s.kind, object: s.of + fmt.Sprint(k), attempts: f.attempts})
	}
}

// retryNow makes a failed k due at once: what is wanted of it changed.
func (s *statusTable[K]) retryNow(k K) {
	if f := s.failed[k]; f != nil {
		f.retryAt = dueNow
	}
}

// retryAllNow makes every failed key due at once.
func (s *statusTable[K]) retryAllNow() {
	for _, f := range s.failed {
		f.retryAt = dueNow
	}
}

// nextRetry is the earliest retry due, or zero if nothing failed.
func (s *statusTable[K]) nextRetry() time.Time {
	var next time.Time
	for _, f := range s.failed {
		next = earliest(next, f.retryAt)
	}
	return next
}

// earliest is the earliest of the times that are not zero, or zero.
func earliest(times ...time.Time) time.Time {
	var first time.Time
	for _, t := range times {
		if !t.IsZero() && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first
}

func (s *statusTable[K]) takeReports() []objectReport {
	r := s.reports
	s.reports = nil
	return r
}

// realServerStatus holds the failed real servers by virtual server, so a
// virtual server's are found without a walk over every failure.
type realServerStatus struct {
	byVS    map[ipvs.Key]*statusTable[netip.AddrPort]
	max     time.Duration
	reports []objectReport
}

func (s *realServerStatus) waiting(k ipvs.Key, id netip.AddrPort, now time.Time) bool {
	t := s.byVS[k]
	return t != nil && t.waiting(id, now)
}

func (s *realServerStatus) fail(k ipvs.Key, id netip.AddrPort, err error, now time.Time, owner types.NamespacedName) {
	t := s.byVS[k]
	if t == nil {
		nt := newStatusTable[netip.AddrPort](kindRealServer, s.max)
		nt.of = k.String() + " "
		t = &nt
		s.byVS[k] = t
	}
	t.fail(id, err, now, owner)
	s.reports = append(s.reports, t.takeReports()...)
}

func (s *realServerStatus) ok(k ipvs.Key, id netip.AddrPort) {
	t := s.byVS[k]
	if t == nil {
		return
	}
	t.ok(id)
	s.reports = append(s.reports, t.takeReports()...)
	if len(t.failed) == 0 {
		delete(s.byVS, k)
	}
}

// of returns virtual server k's failed real servers, or nil.
func (s *realServerStatus) of(k ipvs.Key) *statusTable[netip.AddrPort] { return s.byVS[k] }

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
		next = earliest(next, t.nextRetry())
	}
	return next
}

// takeReports returns the status changes since the last call, of every kind.
func (r *reconciler) takeReports() []objectReport {
	out := r.vs.status.takeReports()
	out = append(out, r.rsStatus.reports...)
	r.rsStatus.reports = nil
	out = append(out, r.addr.status.takeReports()...)
	return append(out, r.entry.status.takeReports()...)
}

// failedCounts says how many objects of each kind have failed.
func (r *reconciler) failedCounts() map[objectKind]int {
	return map[objectKind]int{
		kindVirtualServer: len(r.vs.status.failed), kindRealServer: r.rsStatus.count(),
		kindAddress: len(r.addr.status.failed), kindSetEntry: len(r.entry.status.failed),
	}
}

// nextRetry is when the earliest failed object is due, or zero if none failed.
func (r *reconciler) nextRetry() time.Time {
	return earliest(r.vs.status.nextRetry(), r.rsStatus.nextRetry(), r.addr.status.nextRetry(), r.entry.status.nextRetry())
}
