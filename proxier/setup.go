package proxier

import (
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
)

// What every sync relies on and no API object decides: the dummy link, the
// ipsets and the iptables chains of each family, set up at start-up and at
// every drift check.

// takeEarlySetup waits for the setup Run started and reports whether it
// succeeded; if it failed, the first sync sets up again and reports that.
func (p *Proxier) takeEarlySetup() bool {
	if p.earlySetup == nil {
		return false
	}
	err := <-p.earlySetup
	p.earlySetup = nil
	return err == nil
}

// setupKey names setupKernel's work in setupStatus.
const setupKey = "kube-ipvs0, ipsets and iptables chains"

// recordSetup records the outcome of a setupKernel call, on the sync goroutine.
func (p *Proxier) recordSetup(err error) {
	if err == nil {
		p.setupStatus.ok(setupKey)
		return
	}
	p.setupStatus.fail(setupKey, err, time.Now(), types.NamespacedName{})
}

// setupKernel creates what every sync relies on: the dummy link, the ipsets
// and the iptables glue. All of it is idempotent and keeps existing state;
// readBack is glue.ensure's.
func (p *Proxier) setupKernel(readBack bool) error {
	start := time.Now()
	var took []zap.Field
	lap := func(what string) { took = append(took, zap.Duration(what, time.Since(start))) }
	// Where a setup's time went, counted from its start, for the -v 4 log
	// (the sync line has the total).
	defer func() { p.log.Debug("kernel setup", took...) }()
	if err := p.kernel.Links.EnsureLink(); err != nil {
		return err
	}
	lap("link")
	for _, s := range p.sets() {
		if err := p.kernel.Sets.EnsureSet(s); err != nil {
			return err
		}
	}
	lap("sets")
	for _, g := range p.glues {
		if g.guessing() {
			// Every cluster has default/kubernetes: an IPv4 cluster IP is
			// always wanted.
			filled := map[string]bool{setClusterIP: g.fam == ipv4}
			for _, s := range glueSets() {
				if n, err := p.kernel.Sets.Count(g.fam.set(s)); err == nil && n > 0 {
					filled[s] = true
				}
			}
			g.guess(filled)
		}
		drifted, t, err := g.ensure(readBack)
		if err != nil {
			p.metrics.IPTablesRestoreFailures.Inc()
			return err
		}
		if drifted {
			p.log.Info("iptables chains changed outside the proxier; rewrote them", zap.Stringer("family", g.fam))
		}
		lap("iptables " + g.fam.String())
		took = append(took, zap.Durations("iptables "+g.fam.String()+" lock, save, restore, read back",
			[]time.Duration{t.lock, t.save, t.restore, t.readBack}))
	}
	return nil
}

// sets are the ipsets of the families the node has.
func (p *Proxier) sets() []ipset.Set {
	if p.cfg.IPv6Capable {
		return allSets()
	}
	return ipv4Sets
}

// setupWithReadBack is the kernel setup a drift check runs before its read:
// it also reads the iptables payload back, to repair it if it changed.
func (p *Proxier) setupWithReadBack() error { return p.setupKernel(true) }
