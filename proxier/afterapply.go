package proxier

import (
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
)

// What a sync does once the reconciler has applied the changes: bring the
// iptables chains and the LoadBalancer health checks in line with them.

// syncHealthChecks serves the LoadBalancer health checks as they now are.
// A port that cannot be opened is reported once, with an Event, and tried
// again at every sync.
func (p *Proxier) syncHealthChecks() {
	if !p.healthDirty {
		return
	}
	failed := p.svcHealth.Sync(p.healthChecks)
	p.healthDirty = len(failed) > 0
	for name, err := range failed {
		if p.healthFailed[name] {
			continue
		}
		p.healthFailed[name] = true
		p.log.Warn("cannot serve a Service's health check; retrying at every sync", zap.String("service", name.String()), zap.Error(err))
		if svc := p.changeTracker.service(name); svc != nil {
			p.events.Eventf(svc, nil, v1.EventTypeWarning, "FailedToStartServiceHealthcheck", "Sync", "kube-ipvs-proxy: %v", err)
		}
	}
	for name := range p.healthFailed {
		if failed[name] == nil {
			delete(p.healthFailed, name)
		}
	}
}

// syncGlueAhead writes the rules of sets about to get their first entries,
// and of load-balancer VIPs about to be blocked from the node, before the
// apply writes those entries and their virtual servers. A connection whose
// first packet comes before its rule keeps the conntrack entry that packet
// made: a pod reaching itself through a Service whose loop-back rule came a
// moment late was never masqueraded. Rules that go away are removed after
// the apply, in syncGlue.
func (p *Proxier) syncGlueAhead() {
	for _, g := range p.glues {
		in, grew := g.grow(p.glueInput(g.fam))
		if !grew || !g.use(in) {
			continue
		}
		p.rewriteGlueWith(g, g.rewriteAhead)
	}
}

// rewriteGlue writes g's chains as a sync now wants them, and reads them
// back so that the next drift check need not; a failure is retried like
// the kernel setup. While the setup is failing the sync leaves them to the
// setup's retry, with its backoff: iptables may hang until its deadline,
// and the sync has IPVS, addresses and set entries to write.
func (p *Proxier) rewriteGlue(g *glue) { p.rewriteGlueWith(g, g.rewrite) }

// rewriteGlueWith is rewriteGlue with rewrite or rewriteAhead.
func (p *Proxier) rewriteGlueWith(g *glue, rewrite func() (bool, glueTimes, error)) {
	if p.setupStatus.Failing(setupKey) {
		return
	}
	_, t, err := rewrite()
	p.log.Debug("iptables chains rewritten", zap.Stringer("family", g.fam),
		zap.Durations("lock, save, restore, read back", []time.Duration{t.lock, t.save, t.restore, t.readBack}), zap.Error(err))
	if errors.Is(err, errGlueFailing) || errors.Is(err, errGlueBusy) {
		return // whoever runs or failed reports it; the chains stay behind
	}
	if err != nil {
		p.metrics.IPTablesRestoreFailures.Inc()
		p.recordSetup(err)
	}
}

// syncGlue rewrites the iptables chains when a set they match on was
// filled or emptied, or the VIPs blocked from the node changed, or an
// earlier sync left them behind; a failure is retried like the kernel
// setup.
func (p *Proxier) syncGlue() {
	for _, g := range p.glues {
		g.use(p.glueInput(g.fam))
		if g.behind() {
			p.rewriteGlue(g)
		}
	}
}

// glueInput is what fam's chains depend on now.
func (p *Proxier) glueInput(fam desired.Family) glueInput {
	if p.blockedDirty {
		p.blocked = nil // a new slice: the glue keeps the last one it was given
		for _, list := range p.nodeBlocked {
			p.blocked = append(p.blocked, list...)
		}
		slices.SortFunc(p.blocked, compareEntries)
		p.blocked = slices.Compact(p.blocked)
		p.blockedDirty = false
	}
	in := glueInput{inUse: map[string]bool{}, podCIDR: p.nodeIPs.current.PodCIDR[fam]}
	for _, s := range glueSets() {
		if p.setsInUse[fam.SetName(s)] {
			in.inUse[s] = true
		}
	}
	for _, e := range p.blocked {
		if fam.Holds(e.IP) {
			in.nodeBlocked = append(in.nodeBlocked, e)
		}
	}
	return in
}
