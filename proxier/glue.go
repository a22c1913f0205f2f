package proxier

import (
	"errors"
	"slices"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
)

// How a sync keeps the iptables chains (package glue) and the
// LoadBalancer health checks in line with what it records: rules a change
// needs are written before the apply (syncGlueAhead), the rest after it
// (syncGlue), and the health checks are served once it has applied.

// healthCheckRetry is how soon a health check that could not be opened is
// tried again.
const healthCheckRetry = 5 * time.Second

// syncHealthChecks serves the LoadBalancer health checks as they now are,
// on the addresses healthCheckListen says. A port that cannot be opened is
// reported once, with an Event, and tried again within healthCheckRetry.
func (p *Proxier) syncHealthChecks() {
	if p.cfg.ServeNoHealthChecks {
		return
	}
	on := p.healthCheckListen()
	if !p.checks.dirty && on[desired.IPv4].Equal(p.checks.on[desired.IPv4]) && on[desired.IPv6].Equal(p.checks.on[desired.IPv6]) {
		return
	}
	p.checks.on = on
	failed := p.checks.server.Sync(p.checks.want, on)
	p.checks.dirty = len(failed) > 0
	p.checks.retryAt = time.Time{}
	if len(failed) > 0 {
		// A port taken, an address not yet usable: soon, not only at
		// the next change or drift check.
		p.checks.retryAt = time.Now().Add(healthCheckRetry)
	}
	for name, err := range failed {
		if p.checks.failed[name] {
			continue
		}
		p.checks.failed[name] = true
		p.log.Warn("cannot serve a Service's health check; retrying at every sync", zap.String("service", name.String()), zap.Error(err))
		if svc := p.changeTracker.service(name); svc != nil {
			p.events.Eventf(svc.Reference(), nil, v1.EventTypeWarning, "FailedToStartServiceHealthcheck", "Sync", "kube-ipvs-proxy: %v", err)
		}
	}
	for name := range p.checks.failed {
		if failed[name] == nil {
			delete(p.checks.failed, name)
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
	if p.setup.takeover.Load() {
		return
	}
	for _, g := range p.glues {
		in, grew := g.Grow(p.glueInput(g.Family()))
		if !grew || !g.Use(in) {
			continue
		}
		p.rewriteGlueWith(g, g.RewriteAhead)
	}
}

// rewriteGlue writes g's chains as a sync now wants them, and reads them
// back so that the next drift check need not; a failure is retried like
// the kernel setup. While the setup is failing the sync leaves them to the
// setup's retry, with its backoff: iptables may hang until its deadline,
// and the sync has IPVS, addresses and set entries to write.
func (p *Proxier) rewriteGlue(g *glue.Glue) { p.rewriteGlueWith(g, g.Rewrite) }

// rewriteGlueWith is rewriteGlue with Rewrite or RewriteAhead.
func (p *Proxier) rewriteGlueWith(g *glue.Glue, rewrite func() (bool, glue.Times, error)) {
	// A refused set alone leaves the chains to the syncs: they are written
	// without its rules.
	if f, failing := p.setup.status.Failure(setupKey); failing && !onlySetsRefused(f.Err) {
		return
	}
	_, t, err := rewrite()
	p.log.Debug("iptables chains rewritten", zap.Stringer("family", g.Family()),
		zap.Durations("lock, save, restore, read back", []time.Duration{t.Lock, t.Save, t.Restore, t.ReadBack}), zap.Error(err))
	if errors.Is(err, glue.ErrFailing) || errors.Is(err, glue.ErrBusy) {
		return // whoever runs or failed reports it; the chains stay behind
	}
	if err != nil {
		p.metrics.IPTablesRestoreFailures.WithLabelValues(g.Family().String()).Inc()
		p.recordSetup(err)
	}
}

// syncGlue rewrites the iptables chains when a set they match on was
// filled or emptied, or the VIPs blocked from the node changed, or an
// earlier sync left them behind; a failure is retried like the kernel
// setup.
func (p *Proxier) syncGlue() {
	refused := p.refusedSets()
	for _, g := range p.glues {
		g.Use(p.glueInput(g.Family()))
		// A set the kernel took at last has its entries now (refuseSets).
		g.SetMissing(missingOf(refused, g.Family()))
	}
	if p.setup.takeover.Load() {
		p.takeOver()
		return
	}
	for _, g := range p.glues {
		if g.Behind() {
			p.rewriteGlue(g)
		}
	}
}

// glueInput is what fam's chains depend on now.
func (p *Proxier) glueInput(fam desired.Family) glue.Input {
	if p.blocked.dirty {
		p.blocked.all = nil // a new slice: the glue keeps the last one it was given
		for _, list := range p.blocked.byService {
			p.blocked.all = append(p.blocked.all, list...)
		}
		slices.SortFunc(p.blocked.all, glue.CompareEntries)
		p.blocked.all = slices.Compact(p.blocked.all)
		p.blocked.dirty = false
	}
	in := glue.Input{InUse: map[string]bool{}, PodCIDR: p.nodeIPs.current.PodCIDR[fam]}
	for _, r := range p.nodeIPs.current.Routed {
		if fam.Holds(r.Addr()) {
			in.Routed = append(in.Routed, r)
		}
	}
	for _, s := range glue.Sets() {
		if p.setsInUse[fam.SetName(s)] {
			in.InUse[s] = true
		}
	}
	for _, e := range p.blocked.all {
		if fam.Holds(e.IP) {
			in.NodeBlocked = append(in.NodeBlocked, e)
		}
	}
	return in
}
