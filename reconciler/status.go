package reconciler

import (
	"cmp"
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// realServerStatus holds the failed real servers in a status table per
// virtual server, so a virtual server's are found without a walk over
// every failure. The tables share one list of reports.
type realServerStatus struct {
	byVS    map[ipvs.Key]*status.Table[netip.AddrPort]
	max     time.Duration
	reports []status.Report
}

func (s *realServerStatus) waiting(k ipvs.Key, id netip.AddrPort, now time.Time) bool {
	t := s.byVS[k]
	return t != nil && t.Waiting(id, now)
}

func (s *realServerStatus) fail(k ipvs.Key, id netip.AddrPort, err error, now time.Time, owner types.NamespacedName) {
	t := s.byVS[k]
	if t == nil {
		t = status.NewMemberTable[netip.AddrPort](status.KindRealServer, k.String(), s.max, &s.reports)
		s.byVS[k] = t
	}
	t.Fail(id, err, now, owner)
}

func (s *realServerStatus) ok(k ipvs.Key, id netip.AddrPort) {
	t := s.byVS[k]
	if t == nil {
		return
	}
	t.OK(id)
	if t.Count() == 0 {
		delete(s.byVS, k)
	}
}

// of returns virtual server k's failed real servers, or nil.
func (s *realServerStatus) of(k ipvs.Key) *status.Table[netip.AddrPort] { return s.byVS[k] }

// forget drops virtual server k's failures, silently: they went with it.
func (s *realServerStatus) forget(k ipvs.Key) { delete(s.byVS, k) }

func (s *realServerStatus) count() int {
	n := 0
	for _, t := range s.byVS {
		n += t.Count()
	}
	return n
}

func (s *realServerStatus) nextRetry() time.Time {
	var next time.Time
	for _, t := range s.byVS {
		next = status.Earliest(next, t.NextRetry())
	}
	return next
}

// takeReports returns the status changes since the last call, of every kind.
func (r *Reconciler) takeReports() []status.Report {
	out := r.vs.status.TakeReports()
	out = append(out, r.rsStatus.reports...)
	r.rsStatus.reports = nil
	out = append(out, r.addr.status.TakeReports()...)
	return append(out, r.entry.status.TakeReports()...)
}

// Failed lists the failed objects, sorted by kind and name.
func (r *Reconciler) Failed() []status.Object {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failedLocked()
}

func (r *Reconciler) failedLocked() []status.Object {
	out := r.vs.status.AppendFailed([]status.Object{})
	for _, t := range r.rsStatus.byVS {
		out = t.AppendFailed(out)
	}
	out = r.addr.status.AppendFailed(out)
	out = r.entry.status.AppendFailed(out)
	slices.SortFunc(out, func(a, b status.Object) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Object, b.Object))
	})
	return out
}

// failedCounts says how many objects of each kind have failed.
func (r *Reconciler) failedCounts() map[status.Kind]int {
	return map[status.Kind]int{
		status.KindVirtualServer: r.vs.status.Count(), status.KindRealServer: r.rsStatus.count(),
		status.KindAddress: r.addr.status.Count(), status.KindSetEntry: r.entry.status.Count(),
	}
}

// nextRetry is when the earliest failed object is due, or zero if none failed.
func (r *Reconciler) nextRetry() time.Time {
	return status.Earliest(r.vs.status.NextRetry(), r.rsStatus.nextRetry(), r.addr.status.NextRetry(), r.entry.status.NextRetry())
}
