package proxier

import (
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/svchealth"
)

// changes computes what each input's Service wants and reports its bad input.
// A virtual server two Services want goes to one of them (see claims); the
// Services outside inputs that won or lost one by these changes are
// recomputed too, from more (nil: left until their own next change).
func (p *Proxier) changes(inputs []serviceInput, more func([]types.NamespacedName) []serviceInput) []serviceChange {
	type computed struct {
		in       serviceInput
		st       serviceState
		problems []string
	}
	done := make(map[types.NamespacedName]bool, len(inputs))
	var touched []types.NamespacedName
	compute := func(ins []serviceInput) []computed {
		out := make([]computed, 0, len(ins))
		for _, in := range ins {
			st, problems := p.stateOf(in)
			done[in.name] = true
			touched = append(touched, p.claims.set(in.name, in.service, st)...)
			out = append(out, computed{in, st, problems})
		}
		return out
	}
	all := compute(inputs)
	// A Service recomputed here may hand a virtual server on in turn; each
	// round takes only Services not yet computed, so it ends.
	for more != nil && len(touched) > 0 {
		var outside []types.NamespacedName
		for _, n := range touched {
			if !done[n] {
				done[n] = true
				outside = append(outside, n)
			}
		}
		touched = nil
		if len(outside) > 0 {
			all = append(all, compute(more(outside))...)
		}
	}
	changes := make([]serviceChange, 0, len(all))
	for _, c := range all {
		in := c.in
		st, lost := p.claims.filter(in.name, c.st)
		p.report(in, append(c.problems, conflictProblems(lost)...))
		changes = append(changes, serviceChange{in.name, st})
		mark(p.noLocal, in.name, st.noLocalEndpoints)
		mark(p.noLocalExternal, in.name, st.noLocalExternal)
		if st.healthCheckPort != 0 {
			hc := svchealth.Service{Port: st.healthCheckPort, LocalEndpoints: st.localReady}
			p.healthDirty = p.healthDirty || p.healthChecks[in.name] != hc
			p.healthChecks[in.name] = hc
		} else if _, ok := p.healthChecks[in.name]; ok {
			delete(p.healthChecks, in.name)
			p.healthDirty = true
		}
		if !slices.Equal(p.nodeBlocked[in.name], st.nodeBlocked) {
			p.blockedDirty = true
		}
		if len(st.nodeBlocked) > 0 {
			p.nodeBlocked[in.name] = st.nodeBlocked
		} else {
			delete(p.nodeBlocked, in.name)
		}
	}
	p.metrics.ConflictingClaims.Set(float64(p.claims.conflicting))
	p.metrics.NoLocalEndpoints.WithLabelValues("internal").Set(float64(len(p.noLocal)))
	p.metrics.NoLocalEndpoints.WithLabelValues("external").Set(float64(len(p.noLocalExternal)))
	return changes
}

// mark adds name to set, or removes it.
func mark(set map[types.NamespacedName]bool, name types.NamespacedName, in bool) {
	if in {
		set[name] = true
	} else {
		delete(set, name)
	}
}
