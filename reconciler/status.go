package reconciler

import (
	"cmp"
	"slices"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// takeReports returns the status changes since the last call, of every kind.
func (r *Reconciler) takeReports() []status.Report {
	out := r.vs.status.TakeReports()
	out = append(out, r.rsStatus.TakeReports()...)
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
	out = r.rsStatus.AppendFailed(out)
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
		status.KindVirtualServer: r.vs.status.Count(), status.KindRealServer: r.rsStatus.Count(),
		status.KindAddress: r.addr.status.Count(), status.KindSetEntry: r.entry.status.Count(),
	}
}

// nextRetry is when the earliest failed object is due, or zero if none failed.
func (r *Reconciler) nextRetry() time.Time {
	return status.Earliest(r.vs.status.NextRetry(), r.rsStatus.NextRetry(), r.addr.status.NextRetry(), r.entry.status.NextRetry())
}
