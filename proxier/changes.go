package proxier

import (
	"fmt"
	"slices"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/svchealth"
)

// changes computes what each input's Service wants and reports its bad input.
// A virtual server two Services want goes to one of them (see claims); the
// Services outside inputs that won or lost one by these changes are
// recomputed too, from more (nil: left until their own next change).
func (p *Proxier) changes(inputs []serviceInput, more func([]types.NamespacedName) []serviceInput) []reconciler.Change {
	type computed struct {
		in       serviceInput
		st       desired.State
		problems []string
	}
	done := make(map[types.NamespacedName]bool, len(inputs))
	var touched []types.NamespacedName
	compute := func(ins []serviceInput) []computed {
		out := make([]computed, 0, len(ins))
		for _, in := range ins {
			st, problems := p.stateOf(in)
			done[in.name] = true
			out = append(out, computed{in, st, problems})
		}
		// The claims after every state (stateOf reads no claim): a claim,
		// kept while its Service lives, made between two computations
		// shares its memory pages with their garbage, and holds them (at
		// 50k Services, 4.5 MB of claims held 25 MB of pages).
		for _, c := range out {
			touched = append(touched, p.claims.update(c.in.name, c.in.service, c.st)...)
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
	changes := make([]reconciler.Change, 0, len(all))
	for _, c := range all {
		in := c.in
		st, lost := p.claims.filter(in.name, c.st)
		p.report(in, append(c.problems, conflictProblems(lost)...))
		changes = append(changes, reconciler.Change{Name: in.name, State: st})
		for _, f := range desired.Families {
			setMember(p.noLocal.internal[f], in.name, st.NoLocalEndpoints[f])
			setMember(p.noLocal.external[f], in.name, st.NoLocalExternal[f])
		}
		if st.HealthCheckPort != 0 {
			hc := svchealth.Service{Port: st.HealthCheckPort, In: st.HealthCheckIn, LocalEndpoints: st.LocalReady}
			p.checks.dirty = p.checks.dirty || p.checks.want[in.name] != hc
			p.checks.want[in.name] = hc
		} else if _, ok := p.checks.want[in.name]; ok {
			delete(p.checks.want, in.name)
			p.checks.dirty = true
		}
		if !slices.Equal(p.blocked.byService[in.name], st.NodeBlocked) {
			p.blocked.dirty = true
		}
		if len(st.NodeBlocked) > 0 {
			p.blocked.byService[in.name] = st.NodeBlocked
		} else {
			delete(p.blocked.byService, in.name)
		}
	}
	p.metrics.ConflictingClaims.Set(float64(p.claims.conflicting))
	for _, f := range p.families() {
		p.metrics.NoLocalEndpoints.WithLabelValues("internal", f.String()).Set(float64(len(p.noLocal.internal[f])))
		p.metrics.NoLocalEndpoints.WithLabelValues("external", f.String()).Set(float64(len(p.noLocal.external[f])))
	}
	return changes
}

// setMember adds name to set, or removes it.
func setMember(set map[types.NamespacedName]bool, name types.NamespacedName, in bool) {
	if in {
		set[name] = true
	} else {
		delete(set, name)
	}
}

// stateOf is desired.Compute for a sync. A panic there, a bug some input
// reaches, skips that Service as bad input, reported like any other, while
// the rest is programmed: unrecovered, one object would crash-loop the
// proxier on every node. The stack is logged once per distinct panic.
func (p *Proxier) stateOf(in serviceInput) (st desired.State, problems []string) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		msg := fmt.Sprintf("internal error computing its kernel state (%.200v); service not programmed", r)
		if p.problems[in.name] != msg {
			p.log.Error("panic computing a service's kernel state; service skipped",
				zap.Stringer("service", in.name), zap.Any("panic", r), zap.Stack("stack"))
		}
		st, problems = desired.State{}, []string{msg}
	}()
	return desired.Compute(in.service, in.slices, &p.cfg.Desired, p.nodeIPs.current)
}
