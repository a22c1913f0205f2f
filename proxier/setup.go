package proxier

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/leftovers"
)

// What every sync relies on and no API object decides: the dummy link, the
// ipsets and the iptables chains of each family, set up at start-up and at
// every drift check.

// takeEarlySetup waits for the setup Run started (setUpEarly), up to the
// chains of the first n families of p.glues, and reports whether the
// kernel can be written (see writable). If the setup failed before the
// iptables chains, the first sync sets up again and reports that; if only
// the chains failed, that is recorded and retried with backoff, not at
// once, where iptables may hang again until its deadline.
func (p *Proxier) takeEarlySetup(n int) bool {
	e := &p.setup.early
	for ; e.taken < min(n, len(e.steps)); e.taken++ {
		err := <-e.steps[e.taken]
		if e.taken == 0 {
			e.writable = writable(err)
		}
		// A later step's failure after a recorded one is the retry's to
		// report: it sets every family up again.
		if err != nil && writable(err) && (e.taken == 0 || !p.setup.status.Failing(setupKey)) {
			p.recordSetup(err)
		}
	}
	return e.taken > 0 && e.writable
}

// setUpEarly is the setup Run starts beside the informers' first list: the
// link, the sets and the first family's chains (IPv4's), then each other
// family's chains, each step's outcome on its own channel of steps. The
// critical Services wait for their own families' chains alone: at 10k
// Services the IPv6 chains took 0.8 s of their 3.6 s from exec. Once a
// step fails, the steps after it are left to the setup's retry.
func (p *Proxier) setUpEarly(steps []chan error) {
	start := time.Now()
	err := p.setupKernelOf(false, p.glues[:1])
	ok := err == nil || onlySetsRefused(err)
	if !ok {
		p.log.Warn("kernel setup failed; the first sync tries again", zap.Error(err))
	}
	steps[0] <- err
	for i := 1; i < len(steps); i++ {
		var err error
		if ok {
			err = p.setupChainsOf(p.glues[i : i+1])
			if err != nil {
				p.log.Warn("kernel setup failed; retried with backoff", zap.Error(err))
			}
			ok = err == nil
		}
		steps[i] <- err
	}
	if ok {
		p.log.Debug("kernel set up while the informers list", zap.Duration("took", time.Since(start)))
	}
}

// chainsFor is how many of p.glues the critical Services among inputs
// need set up before they are programmed: the first, IPv4's, unless one
// of them has an IPv6 cluster IP.
func (p *Proxier) chainsFor(inputs []serviceInput) int {
	for _, in := range inputs {
		if in.service == nil {
			continue
		}
		// ClusterIP alone, from an apiserver older than dual-stack.
		for _, ip := range append([]string{in.service.ClusterIP}, in.service.ClusterIPs...) {
			if a, err := netip.ParseAddr(ip); err == nil && a.Is6() {
				return len(p.glues)
			}
		}
	}
	return 1
}

// chainsError is a setupKernel failure in the iptables chains: the dummy
// link is in place, and every ipset but those a setsError in it names.
type chainsError struct{ err error }

func (e chainsError) Error() string { return e.err.Error() }
func (e chainsError) Unwrap() error { return e.err }

// setsError is a setupKernel failure in sets the kernel refused to create:
// the rest of the setup went on without them (refuseSets).
type setsError struct{ err error }

func (e setsError) Error() string { return e.err.Error() }
func (e setsError) Unwrap() error { return e.err }

// onlySetsRefused says whether a setup failed only in sets the kernel
// refused: the chains were written without their rules.
func onlySetsRefused(err error) bool {
	return errors.As(err, new(setsError)) && !errors.As(err, new(chainsError))
}

// writable says whether a setup that returned err left what every write
// needs, the dummy link, so that syncs can go on programming IPVS,
// addresses and set entries while the chains or a refused set are retried.
func writable(err error) bool {
	return err == nil || errors.As(err, new(chainsError)) || errors.As(err, new(setsError))
}

// retrySetup retries a failed setup once its backoff is due. Unless inline,
// the retry runs on a goroutine of its own, as iptables may hang until its
// deadline: syncs go on meanwhile, the retry triggers one when it ends, and
// that sync records its outcome.
func (p *Proxier) retrySetup(now time.Time, inline bool) {
	if p.setup.retry != nil {
		select {
		case err := <-p.setup.retry:
			p.setup.retry = nil
			p.recordSetup(err)
		default:
			if inline {
				p.recordSetup(<-p.setup.retry)
				p.setup.retry = nil
			} else {
				// A drift check's failed setup set a retry time meanwhile.
				p.setup.status.PutOff(setupKey, now)
			}
		}
		return
	}
	if !p.setup.status.Failing(setupKey) || p.setup.status.Waiting(setupKey, now) {
		return
	}
	if inline {
		p.recordSetup(p.setupKernel(false))
		return
	}
	// Put the next retry off while this one runs, so that syncs do not
	// start another, nor ask the runner for one at once.
	p.setup.status.PutOff(setupKey, now)
	done := make(chan error, 1)
	p.setup.retry = done
	go func() {
		done <- p.setupKernel(false)
		p.runner.Trigger()
	}()
}

// markSynced tells health and the last-sync metric that a sync succeeded,
// unless the setup is failing. That is upstream's behaviour: its sync
// returns before marking itself done when iptables-restore fails (or the
// dummy link or an ipset cannot be made), so /healthz turns 503 once a
// queued change has waited longer than the health timeout, and turns 200
// again at the first sync after iptables works.
func (p *Proxier) markSynced() {
	if p.setup.status.Failing(setupKey) {
		return
	}
	p.health.Updated()
	for _, fam := range p.families() {
		p.metrics.LastSyncTimestamp.WithLabelValues(fam.String()).SetToCurrentTime()
	}
}

// setupKey names setupKernel's work in setup.status.
const setupKey = "kube-ipvs0, ipsets and iptables chains"

// recordSetup records the outcome of a setupKernel call, on the sync goroutine.
func (p *Proxier) recordSetup(err error) {
	if err == nil {
		p.setup.status.OK(setupKey)
		return
	}
	p.setup.status.Fail(setupKey, err, time.Now(), types.NamespacedName{})
}

// setupKernel creates what every sync relies on: the dummy link, the ipsets
// and the iptables glue. All of it is idempotent and keeps existing state;
// readBack is glue.ensure's.
func (p *Proxier) setupKernel(readBack bool) error { return p.setupKernelOf(readBack, p.glues) }

// setupKernelOf is setupKernel with the chains of glues alone.
func (p *Proxier) setupKernelOf(readBack bool, glues []*glue.Glue) error {
	// A retry (retrySetup) and a drift check's setup may overlap.
	p.setup.mu.Lock()
	defer p.setup.mu.Unlock()
	l := startLaps()
	defer func() { p.log.Debug("kernel setup", l.fields...) }()
	if err := p.kernel.Links.EnsureLink(); err != nil {
		return err
	}
	l.lap("link")
	// A set the kernel refuses holds back only what needs it.
	var refused []string
	var setErrs []error
	for _, s := range p.sets() {
		if err := p.kernel.Sets.EnsureSet(s); err != nil {
			refused = append(refused, s.Name)
			setErrs = append(setErrs, err)
		}
	}
	p.refuseSets(refused)
	l.lap("sets")
	var setsErr error
	if len(setErrs) > 0 {
		setsErr = setsError{fmt.Errorf("the kernel refused %d ipsets; their entries and rules wait for them: %w", len(refused), errors.Join(setErrs...))}
	}
	if !p.setup.checked {
		p.setup.checked = true
		p.lookForIPTablesMode()
	}
	if p.setup.takeover.Load() {
		return setsErr // the chains follow the first apply (takeOver)
	}
	if err := p.ensureChains(glues, readBack, l); err != nil {
		return chainsError{errors.Join(err, setsErr)}
	}
	return setsErr
}

// setupChainsOf is the part of setupKernel that writes the chains of
// glues: those setUpEarly leaves for after the critical Services.
func (p *Proxier) setupChainsOf(glues []*glue.Glue) error {
	p.setup.mu.Lock()
	defer p.setup.mu.Unlock()
	if p.setup.takeover.Load() {
		return nil
	}
	l := startLaps()
	defer func() { p.log.Debug("kernel setup", l.fields...) }()
	if err := p.ensureChains(glues, false, l); err != nil {
		return chainsError{err}
	}
	return nil
}

// ensureChains writes (or checks, with readBack) the chains of glues,
// stopping at the first family that fails.
func (p *Proxier) ensureChains(glues []*glue.Glue, readBack bool, l *laps) error {
	for _, g := range glues {
		if g.Guessing() {
			// Every cluster has default/kubernetes: an IPv4 cluster IP is
			// always wanted.
			filled := map[string]bool{desired.SetClusterIP: g.Family() == desired.IPv4}
			for _, s := range glue.Sets() {
				if n, err := p.kernel.Sets.Count(g.Family().SetName(s)); err == nil && n > 0 {
					filled[s] = true
				}
			}
			g.Guess(filled)
		}
		drifted, t, err := g.Ensure(readBack)
		if err != nil {
			p.metrics.IPTablesRestoreFailures.WithLabelValues(g.Family().String()).Inc()
			return fmt.Errorf("%s iptables chains: %w", g.Family(), err)
		}
		if drifted {
			p.log.Info("iptables chains changed outside the proxier; rewrote them", zap.Stringer("family", g.Family()))
		}
		l.lap("iptables " + g.Family().String())
		l.fields = append(l.fields, zap.Durations("iptables "+g.Family().String()+" lock, save, restore, read back",
			[]time.Duration{t.Lock, t.Save, t.Restore, t.ReadBack}))
	}
	return nil
}

// laps are where a setup's time went, counted from its start, for the -v 4
// log (the sync line has the total).
type laps struct {
	start  time.Time
	fields []zap.Field
}

func startLaps() *laps { return &laps{start: time.Now()} }

func (l *laps) lap(what string) { l.fields = append(l.fields, zap.Duration(what, time.Since(l.start))) }

// refuseSets tells the reconciler and the chains which sets the kernel
// refused to create, by name, so that the entries and the rules of those
// sets wait for them while everything else is programmed. A newly refused
// set leaves the chains now: a rule on it would fail the whole restore. A
// set the kernel took at last stays out of them until a sync has written
// its entries (syncGlue): the VIP filter would otherwise reject the
// traffic of its Services meanwhile. setup.mu is held.
func (p *Proxier) refuseSets(names []string) {
	if slices.Equal(names, p.refusedSets()) {
		return
	}
	p.setup.refused.Store(&names)
	p.rec.SetsMissing(names)
	for _, g := range p.glues {
		g.SetMissing(union(g.Missing(), missingOf(names, g.Family())))
	}
}

// refusedSets are the sets the last setup found the kernel refuses.
func (p *Proxier) refusedSets() []string {
	if r := p.setup.refused.Load(); r != nil {
		return *r
	}
	return nil
}

// missingOf names, by their IPv4 names as the chains take them, the sets of
// family fam among names.
func missingOf(names []string, fam desired.Family) map[string]bool {
	var missing map[string]bool
	for _, s := range desired.IPv4Sets {
		if slices.Contains(names, fam.SetName(s.Name)) {
			if missing == nil {
				missing = map[string]bool{}
			}
			missing[s.Name] = true
		}
	}
	return missing
}

func union(a, b map[string]bool) map[string]bool {
	if len(b) == 0 {
		return a
	}
	out := maps.Clone(b)
	for k := range a {
		out[k] = true
	}
	return out
}

// families are the IP families the proxier runs, IPv4 first: the node's.
// Upstream runs a proxier per family, so its metrics carry the family.
func (p *Proxier) families() []desired.Family {
	if p.cfg.Desired.IPv6Capable {
		return desired.Families[:]
	}
	return desired.Families[:1]
}

// sets are the ipsets of the families the node has.
func (p *Proxier) sets() []ipset.Set {
	if p.cfg.Desired.IPv6Capable {
		return desired.AllSets()
	}
	return desired.IPv4Sets
}

// setupWithReadBack is the kernel setup a drift check runs before its read:
// it also reads the iptables payload back, to repair it if it changed.
func (p *Proxier) setupWithReadBack() error { return p.setupKernel(true) }

// lookForIPTablesMode reads, once, what kube-proxy's iptables mode left on
// this node. Where its rules still dispatch Services (its chains are in the
// chains we share by name), ours would replace that dispatch before IPVS is
// programmed, so until the first apply they wait (takeOver).
func (p *Proxier) lookForIPTablesMode() {
	for _, ipt := range []iptables.Interface{p.kernel.IPTables, p.kernel.IP6Tables} {
		if ipt == nil {
			continue
		}
		saved, err := ipt.Save()
		if err != nil {
			continue // the glue's own save reports it
		}
		left, answers := leftovers.IPTablesMode(saved)
		if left {
			p.setup.iptablesMode.Store(true)
		}
		if answers && !p.setup.takeover.Load() {
			p.log.Info("kube-proxy's iptables mode still answers for Services; our chains follow the first sync's IPVS objects")
			p.setup.takeover.Store(true)
		}
	}
}

// IPTablesModeLeft says whether the first kernel setup found chains of
// kube-proxy's iptables mode, for the command to remove after the first sync.
func (p *Proxier) IPTablesModeLeft() bool { return p.setup.iptablesMode.Load() }

// takeOver ends the wait of a takeover from iptables mode, once the first
// sync has programmed IPVS: the setup, run again, writes our chains, and
// from then on IPVS answers.
func (p *Proxier) takeOver() {
	if p.setup.takeover.Swap(false) {
		p.recordSetup(p.setupKernel(false))
	}
}
