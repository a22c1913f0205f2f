// Package rsstatus keeps the failed real servers of virtual servers: a
// status table (package status) per virtual server, so that a virtual
// server's are found without a walk over every failure. The tables share
// one list of reports.
package rsstatus

import (
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// Tables holds the failed real servers, by virtual server.
type Tables struct {
	byVS    map[objects.Key]*status.Table[netip.AddrPort]
	max     time.Duration
	reports []status.Report
}

// New returns tables whose failed real servers are retried after at most
// max.
func New(max time.Duration) Tables {
	return Tables{byVS: map[objects.Key]*status.Table[netip.AddrPort]{}, max: max}
}

// Waiting says whether real server id of virtual server k failed and its
// retry is not due yet.
func (s *Tables) Waiting(k objects.Key, id netip.AddrPort, now time.Time) bool {
	t := s.byVS[k]
	return t != nil && t.Waiting(id, now)
}

// Fail records a failed write of real server id of virtual server k,
// wanted by owner (zero if unwanted).
func (s *Tables) Fail(k objects.Key, id netip.AddrPort, err error, now time.Time, owner types.NamespacedName) {
	t := s.byVS[k]
	if t == nil {
		t = status.NewMemberTable[netip.AddrPort](status.KindRealServer, k.String(), s.max, &s.reports)
		s.byVS[k] = t
	}
	t.Fail(id, err, now, owner)
}

// OK records that real server id of virtual server k is as desired.
func (s *Tables) OK(k objects.Key, id netip.AddrPort) {
	t := s.byVS[k]
	if t == nil {
		return
	}
	t.OK(id)
	if t.Count() == 0 {
		delete(s.byVS, k)
	}
}

// Of returns virtual server k's failed real servers, or nil.
func (s *Tables) Of(k objects.Key) *status.Table[netip.AddrPort] { return s.byVS[k] }

// Forget drops virtual server k's failures, silently: they went with it.
func (s *Tables) Forget(k objects.Key) { delete(s.byVS, k) }

// Count is how many real servers are failed.
func (s *Tables) Count() int {
	n := 0
	for _, t := range s.byVS {
		n += t.Count()
	}
	return n
}

// NextRetry is the earliest retry due, or zero if nothing failed.
func (s *Tables) NextRetry() time.Time {
	var next time.Time
	for _, t := range s.byVS {
		next = status.Earliest(next, t.NextRetry())
	}
	return next
}

// TakeReports returns the reports since the last call.
func (s *Tables) TakeReports() []status.Report {
	r := s.reports
	s.reports = nil
	return r
}

// AppendFailed appends the failed real servers to out.
func (s *Tables) AppendFailed(out []status.Object) []status.Object {
	for _, t := range s.byVS {
		out = t.AppendFailed(out)
	}
	return out
}
