package proxier

import (
	"context"
	"errors"
	"strings"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// Kernel is every kernel table the proxier writes.
type Kernel struct {
	IPVS     ipvs.Interface
	Links    dummyiface.Interface
	Sets     ipset.Interface
	IPTables iptables.Interface
}

// EventRecorder posts an event about an API object; client-go's events
// recorder satisfies it.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Proxier programs the kernel from Services and EndpointSlices.
type Proxier struct {
	*changeTracker // informer handlers

	cfg     Config
	kernel  Kernel
	log     *zap.Logger
	health  *healthz.State
	metrics *metrics.Metrics
	events  EventRecorder
	rec     *reconciler
	runner  *runner

	// Owned by the sync goroutine.
	lastFull time.Time
	needFull bool
	// After a failed sync the kernel is re-read at fullAt, with backoff, so a
	// persistently failing object does not turn every sync into a full one.
	fullAt   time.Time
	failures int
	problems map[types.NamespacedName]string
	services map[types.NamespacedName]*v1.Service
}

// New builds a proxier; nothing touches the kernel before Run.
func New(cfg Config, k Kernel, log *zap.Logger, health *healthz.State, m *metrics.Metrics, events EventRecorder) *Proxier {
	if cfg.Scheduler == "" {
		cfg.Scheduler = "rr"
	}
	p := &Proxier{
		cfg: cfg, kernel: k, log: log, health: health, metrics: m, events: events,
		needFull: true,
		problems: map[types.NamespacedName]string{},
	}
	names := make([]string, len(ipv4Sets))
	for i, s := range ipv4Sets {
		names[i] = s.Name
	}
	p.rec = newReconciler(k.IPVS, k.Links, k.Sets, names, p.cfg.excluded)
	p.runner = newRunner(p.syncOnce, cfg.MinSyncPeriod, cfg.SyncPeriod)
	p.changeTracker = newChangeTracker(p.queued)
	return p
}

func (p *Proxier) queued() {
	p.health.QueuedUpdate()
	p.metrics.LastQueuedTimestamp.SetToCurrentTime()
	s, e := p.changeTracker.pendingCounts()
	p.metrics.ServiceChangesPending.Set(float64(s))
	p.metrics.EndpointChangesPending.Set(float64(e))
	p.runner.Trigger()
}

// Run syncs until ctx is done. The first sync waits for both informer caches.
func (p *Proxier) Run(ctx context.Context) {
	p.runner.Loop(ctx)
}

// SyncNow runs one sync on the caller's goroutine; for tests and tools.
func (p *Proxier) SyncNow() { p.syncOnce() }

// setupKernel creates what every sync relies on: the dummy link, the ipsets
// and the iptables glue. All of it is idempotent and keeps existing state.
func (p *Proxier) setupKernel() error {
	if err := p.kernel.Links.EnsureLink(); err != nil {
		return err
	}
	sets := ipv4Sets
	if p.cfg.IPv6Capable {
		sets = append(append([]ipset.Set(nil), ipv4Sets...), ipv6Sets()...)
	}
	for _, s := range sets {
		if err := p.kernel.Sets.EnsureSet(s); err != nil {
			return err
		}
	}
	if err := writeGlue(p.kernel.IPTables, &p.cfg); err != nil {
		p.metrics.IPTablesRestoreFailures.Inc()
		return err
	}
	return nil
}

func (p *Proxier) syncOnce() {
	if !p.changeTracker.synced() {
		p.log.Debug("skipping sync: informer caches not synced yet")
		return
	}
	start := time.Now()
	full := p.needFull || start.Sub(p.lastFull) >= p.cfg.SyncPeriod || !p.fullAt.IsZero() && !start.Before(p.fullAt)
	inputs := p.changeTracker.take(full)
	s, e := p.changeTracker.pendingCounts()
	p.metrics.ServiceChangesPending.Set(float64(s))
	p.metrics.EndpointChangesPending.Set(float64(e))

	opsBefore := p.rec.ops
	err := p.sync(inputs, full)
	elapsed := time.Since(start)
	p.metrics.ObserveSync(elapsed, full)
	p.metrics.KernelOpsTotal.Add(float64(p.rec.ops - opsBefore))
	if err != nil {
		p.metrics.SyncFailuresTotal.Inc()
		// The reconciler keeps failed keys dirty, so every sync retries
		// them; a full sync after a backoff also re-reads the kernel in case
		// our picture of it was wrong.
		backoff := min(p.cfg.SyncPeriod, time.Second<<min(p.failures, 10))
		p.failures++
		p.fullAt = time.Now().Add(backoff)
		p.log.Error("sync failed; retrying", zap.Error(err), zap.Bool("full", full), zap.Duration("fullSyncIn", backoff))
		p.runner.RetryAfter(backoff)
		return
	}
	now := time.Now()
	if full {
		p.lastFull, p.needFull, p.fullAt, p.failures = now, false, time.Time{}, 0
	}
	for _, in := range inputs {
		if in.change == nil {
			continue
		}
		p.metrics.ServiceChangesTotal.Add(float64(in.change.serviceEdits))
		p.metrics.EndpointChangesTotal.Add(float64(in.change.sliceEdits))
		for _, t := range in.change.triggerTimes {
			p.metrics.NetworkProgrammingDuration.Observe(now.Sub(t).Seconds())
		}
	}
	p.health.Updated()
	p.metrics.LastSyncTimestamp.SetToCurrentTime()
	p.log.Debug("synced", zap.Bool("full", full), zap.Int("services", len(inputs)),
		zap.Int("kernelOps", p.rec.ops-opsBefore), zap.Duration("took", elapsed))
}

func (p *Proxier) sync(inputs []serviceInput, full bool) error {
	// Record what is wanted before touching the kernel: the inputs are gone
	// from the tracker, so a kernel failure must not lose them.
	for _, in := range inputs {
		st, problems := desiredState(in.service, in.slices, &p.cfg)
		p.report(in, problems)
		p.rec.setService(in.name, st)
	}
	if full {
		// A full sync saw every Service the tracker knows; anything else the
		// reconciler still holds is gone.
		seen := make(map[types.NamespacedName]bool, len(inputs))
		for _, in := range inputs {
			seen[in.name] = true
		}
		for name := range p.rec.byService {
			if !seen[name] {
				p.rec.setService(name, serviceState{})
			}
		}
		if err := p.setupKernel(); err != nil {
			return err
		}
		if err := p.rec.refresh(); err != nil {
			return err
		}
	}
	errs := p.rec.apply()
	if full {
		errs = append(errs, p.rec.drain()...)
	}
	return errors.Join(errs...)
}

// report logs and posts an event for a Service's bad input, once per distinct
// set of problems, so a periodic sync does not repeat it.
func (p *Proxier) report(in serviceInput, problems []string) {
	msg := strings.Join(problems, "; ")
	if p.problems[in.name] == msg {
		return
	}
	if msg == "" {
		delete(p.problems, in.name)
		return
	}
	p.problems[in.name] = msg
	p.log.Warn("skipping invalid parts of service", zap.Stringer("service", in.name), zap.String("problems", msg))
	if p.events != nil && in.service != nil {
		p.events.Eventf(in.service, nil, v1.EventTypeWarning, "InvalidService", "Sync", "kube-ipvs-proxy skipped: %s", msg)
	}
}

// OnNodeChange tracks whether this node may take load-balancer traffic: not
// while it is being deleted or drained by the cluster autoscaler.
func (p *Proxier) OnNodeChange(node *v1.Node) {
	eligible := node != nil && node.DeletionTimestamp == nil
	if node != nil {
		for _, t := range node.Spec.Taints {
			if t.Key == "ToBeDeletedByClusterAutoscaler" {
				eligible = false
			}
		}
	}
	p.health.SetNodeEligible(eligible)
}
