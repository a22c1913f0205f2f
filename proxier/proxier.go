package proxier

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/nodeaddrs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/svchealth"
)

// Kernel is every kernel table the proxier writes.
type Kernel struct {
	IPVS     ipvs.Interface
	Links    dummyiface.Interface
	Sets     ipset.Interface
	IPTables iptables.Interface
	// IP6Tables writes the IPv6 chains; nil on a node without IPv6.
	IP6Tables iptables.Interface
	// NodeAddrs lists the node's addresses, for NodePorts and external
	// IPs; nil for none.
	NodeAddrs nodeaddrs.Interface
	// Conntrack deletes the entries of UDP flows to removed real servers;
	// nil leaves them to time out.
	Conntrack conntrack.Interface
}

// NewKernel opens the kernel tables over netlink, and iptables (and
// ip6tables, with ipv6) through its binaries. It loads no module and sets no
// sysctl.
func NewKernel(ipv6 bool) (Kernel, error) {
	k := Kernel{Links: dummyiface.NewNetlink(dummyiface.DefaultLinkName), NodeAddrs: nodeaddrs.NewNetlink(dummyiface.DefaultLinkName), Conntrack: conntrack.Netlink{}}
	var err error
	if k.IPVS, err = ipvs.NewNetlink(); err != nil {
		return k, err
	}
	if k.Sets, err = ipset.NewNetlink(); err != nil {
		return k, err
	}
	if k.IPTables, err = iptables.NewIPv4(); err != nil {
		return k, err
	}
	if ipv6 {
		if k.IP6Tables, err = iptables.NewIPv6(); err != nil {
			return k, err
		}
	}
	return k, nil
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
	rec     *reconciler.Reconciler
	runner  *runner
	// glues are the iptables chains of each family the node has, IPv4
	// first.
	glues []*glue.Glue

	// mu makes syncs one at a time: the runner's and SyncNow's.
	mu sync.Mutex

	// drift is when the next drift check runs; owned by the sync goroutine.
	drift driftSchedule
	// setup is the kernel setup's progress and status.
	setup    kernelSetup
	problems map[types.NamespacedName]string
	// claims decides which Service gets a virtual server two want.
	claims *claims
	// noLocal holds the Services whose traffic policy Local finds no
	// endpoint on this node.
	noLocal noLocalEndpoints
	// blocked holds the load-balancer VIP:ports the node may not reach,
	// for the glue.
	blocked blockedVIPs
	// setsInUse are the ipsets some Service wants an entry in, as of the
	// last record.
	setsInUse map[string]bool
	nodeIPs   nodeIPs
	// checks are the LoadBalancers' health checks.
	checks healthChecks
	// critical tracks the critical Services alone, fed by their own small
	// informers (see Critical), until the cluster-wide caches have synced;
	// then criticalStop is closed and critical set to nil.
	// cidrs are the Service CIDRs, for --ipvs-vip-mode=local-route.
	cidrs        serviceCIDRs
	critical     *changeTracker
	criticalStop chan struct{}
}

// New builds a proxier; nothing touches the kernel before Run.
func New(cfg Config, k Kernel, log *zap.Logger, health *healthz.State, m *metrics.Metrics, events EventRecorder) *Proxier {
	p := &Proxier{
		cfg: cfg, kernel: k, log: log, health: health, metrics: m, events: events,
		problems: map[types.NamespacedName]string{},
		claims:   newClaims(),
		noLocal:  newNoLocalEndpoints(),
		blocked:  blockedVIPs{byService: map[types.NamespacedName][]ipset.Entry{}},
		checks: healthChecks{want: map[types.NamespacedName]svchealth.Service{}, failed: map[types.NamespacedName]bool{},
			server: svchealth.New(func() bool { ok, _ := health.Healthy(); return ok })},
		setup: kernelSetup{status: status.NewTable[string](status.KindSetup, cmp.Or(cfg.SyncPeriod, reconciler.DefaultRetryMax))},
	}
	var names []string
	for _, s := range p.sets() {
		names = append(names, s.Name)
	}
	p.glues = []*glue.Glue{glue.New(k.IPTables, desired.IPv4, cfg.Glue)}
	if cfg.Desired.IPv6Capable {
		p.glues = append(p.glues, glue.New(k.IP6Tables, desired.IPv6, cfg.Glue))
	}
	for _, fam := range p.families() {
		m.InitFamily(fam.String())
	}
	p.rec = reconciler.New(reconciler.Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, Conntrack: k.Conntrack},
		reconciler.Options{SetNames: names, Excluded: p.cfg.excluded, RetryMax: cfg.SyncPeriod, Now: cfg.Now})
	p.runner = newRunner(func() bool { return p.syncOnce(false) }, cfg.MinSyncPeriod, cfg.SyncPeriod)
	p.changeTracker = newChangeTracker(p.queued)
	critical := newChangeTracker(nil)
	critical.onChange = func() {
		if critical.synced() {
			p.runner.Trigger()
		}
	}
	p.critical, p.criticalStop = critical, make(chan struct{})
	return p
}

// CriticalFeed takes the events of the critical Services' own informers
// (informers.StartCritical); Stop closes once the cluster-wide caches have
// synced and the feed is no longer read.
type CriticalFeed struct {
	*changeTracker
	Stop <-chan struct{}
}

// Critical returns the feed for the critical Services' own informers, so
// that they are programmed long before the cluster-wide list completes.
func (p *Proxier) Critical() CriticalFeed {
	return CriticalFeed{changeTracker: p.critical, Stop: p.criticalStop}
}

func (p *Proxier) queued() {
	p.health.QueuedUpdate()
	for _, fam := range p.families() {
		p.metrics.LastQueuedTimestamp.WithLabelValues(fam.String()).SetToCurrentTime()
	}
	s, e := p.changeTracker.pendingCounts()
	p.metrics.ServiceChangesPending.Set(float64(s))
	p.metrics.EndpointChangesPending.Set(float64(e))
	// Until both caches are synced a sync would only skip, and spend a
	// rate-limit token the first real sync then waits for.
	if p.changeTracker.synced() {
		p.runner.Trigger()
	}
}

// Run syncs until ctx is done. The first sync waits for both informer caches.
// The kernel setup and the first sync's read of the kernel need no API
// object, so they start at once, beside the informers' first list, rather
// than on the critical path of a cold start or a restart.
func (p *Proxier) Run(ctx context.Context) {
	p.startEarly(p.cfg.SyncPeriod)
	p.runner.Loop(ctx)
}

// startEarly starts the first sync's read of the kernel, which the first
// sync takes as stale if older than readMaxAge, and the kernel setup.
func (p *Proxier) startEarly(readMaxAge time.Duration) {
	p.rec.ReadAhead(readMaxAge)
	steps := make([]chan error, len(p.glues))
	for i := range steps {
		steps[i] = make(chan error, 1)
	}
	p.setup.early.steps = steps
	go p.setUpEarly(steps)
}

// SyncNow runs one sync on the caller's goroutine, doing a due drift check
// inline rather than in the background; for tests and tools.
func (p *Proxier) SyncNow() { p.syncOnce(true) }

// syncOnce reports whether it applied changes (see runner). A sync is
// three steps: schedule decides what it takes, sync writes it, observe
// reports it.
//
// A kernel object that fails to be written does not fail the sync: it is
// retried alone (see status.Table) and reported by reportObjects. Health
// is not updated (markSynced) when a sync cannot write at all, the first
// sync when the kernel cannot be read, or, as upstream, while the kernel
// setup (kube-ipvs0, the ipsets, the iptables chains) fails.
func (p *Proxier) syncOnce(inline bool) (applied bool) {
	called := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.schedule(inline)
	if !ok {
		return r.applied
	}
	read, err := p.sync(r.inputs, r.first, r.setUp, r.due, inline)
	p.observe(r, read, err, called)
	return r.applied
}

// syncRound is what schedule decided one sync takes.
type syncRound struct {
	start time.Time
	// first is the first sync: every Service, the kernel adopted before
	// anything is written.
	first bool
	// due says a drift check is due; setUp that the kernel setup is done.
	due, setUp bool
	inputs     []serviceInput
	// applied says the sync applies changes (see runner).
	applied bool
}

// schedule decides what this sync takes: the changed Services (every one
// at the first sync, after the critical ones), whether a drift check is
// due, and the node's addresses re-read when one starts. It says no (ok
// false) while the informers have not listed, or the node's addresses were
// never read; r.applied then says whether critical Services were
// programmed early.
func (p *Proxier) schedule(inline bool) (r syncRound, ok bool) {
	if !p.changeTracker.synced() {
		if p.critical != nil && p.critical.synced() {
			return syncRound{applied: p.programCriticalEarly()}, false
		}
		p.log.Debug("skipping sync: informer caches not synced yet")
		return r, false
	}
	r.start = time.Now()
	r.first = p.drift.lastFull.IsZero()
	r.due = p.drift.needFull || r.start.Sub(p.drift.lastFull) >= p.cfg.SyncPeriod || !p.drift.fullAt.IsZero() && !r.start.Before(p.drift.fullAt)
	// The node's addresses are re-read when a drift check starts, not at
	// every sync while one runs.
	if r.first || r.due && !p.rec.Checking() || p.nodeIPs.takeChanged() {
		if err := p.refreshNodeIPs(); err != nil {
			p.waitForNodeAddrs(err)
			return syncRound{}, false
		}
	}
	if r.first {
		p.log.Info("informer caches synced; first sync")
		if p.critical != nil {
			close(p.criticalStop)
			p.critical = nil
		}
	}
	// Critical Services (default/kubernetes, cluster DNS) go first: node
	// agents wait on them, and a cold start at scale is long.
	r.setUp = p.setup.done
	if r.first {
		inputs := p.changeTracker.peek(p.cfg.CriticalServices)
		// Taken even when set up: an IPv6 critical Service waits for its
		// chains although the IPv4 ones came first.
		if ok := p.takeEarlySetup(p.chainsFor(inputs)); !r.setUp {
			r.setUp = ok
		}
		p.warnMissingCritical(inputs)
		r.setUp = p.programCritical(inputs, r.setUp)
		// The other families' chains before every other Service.
		p.takeEarlySetup(len(p.glues))
	} else {
		p.retrySetup(r.start, inline)
	}
	p.syncRoutes()
	r.inputs = p.changeTracker.take(r.first)
	r.applied = r.first || len(r.inputs) > 0
	s, e := p.changeTracker.pendingCounts()
	p.metrics.ServiceChangesPending.Set(float64(s))
	p.metrics.EndpointChangesPending.Set(float64(e))
	return r, true
}

// observe reports a sync: its metrics, the retry of what failed (a failed
// kernel read is retried after a backoff), health, and one log line.
func (p *Proxier) observe(r syncRound, read *reconciler.CheckResult, err error, called time.Time) {
	out := p.rec.Outcome()
	done := out.Work
	full := read != nil
	elapsed := time.Since(r.start)
	if full {
		elapsed = time.Since(read.Started)
	}
	for _, fam := range p.families() {
		p.metrics.ObserveSync(fam.String(), elapsed, full)
	}
	p.metrics.KernelOpsTotal.Add(float64(done.Ops))
	for _, fam := range p.families() {
		if n := done.ConntrackCleared[fam]; n > 0 {
			p.metrics.ConntrackDeleted.WithLabelValues(fam.String()).Add(float64(n))
		}
	}
	if len(done.Grown) > 0 {
		p.log.Info("ipsets grown before they would fill", zap.Strings("sets", done.Grown))
	}
	if done.ConntrackErr != nil {
		p.log.Warn("stale UDP conntrack entries not deleted; they time out instead", zap.Error(done.ConntrackErr))
	}
	failed := p.reportObjects(out)
	retry := status.Earliest(out.RetryAt, p.setup.status.NextRetry(), p.checks.retryAt)
	if err != nil {
		// The drift check is retried after a backoff; the changes were
		// applied all the same, except at the first sync, which wrote
		// nothing and is repeated whole.
		backoff := min(p.cfg.SyncPeriod, time.Second<<min(p.drift.failures, 10))
		p.drift.failures++
		p.drift.fullAt = time.Now().Add(backoff)
		if retry.IsZero() || p.drift.fullAt.Before(retry) {
			retry = p.drift.fullAt
		}
		p.log.Error("kernel read failed; retrying", zap.Error(err), zap.Bool("first", r.first), zap.Duration("retryIn", backoff))
	}
	if !retry.IsZero() {
		p.runner.RetryAt(retry)
	}
	if err != nil || failed > 0 {
		p.metrics.SyncFailuresTotal.Inc()
	}
	if err != nil && r.first {
		return
	}
	now := time.Now()
	if r.first {
		p.dropLocalRoutes()
	}
	if r.first && p.cfg.AfterFirstSync != nil {
		go p.cfg.AfterFirstSync()
	}
	if full && err == nil {
		p.drift.lastFull, p.drift.needFull, p.drift.fullAt, p.drift.failures = now, false, time.Time{}, 0
	}
	if full && read.Stale {
		// The start-up's read outlasted a sync period while the informers
		// listed: the first sync took it, and a check reads again now.
		p.log.Info("kernel read at start-up older than the sync period when the informers synced; checking again")
		p.drift.needFull = true
		p.runner.Trigger()
	}
	for _, in := range r.inputs {
		if in.change == nil {
			continue
		}
		p.metrics.ServiceChangesTotal.Add(float64(in.change.serviceEdits))
		p.metrics.EndpointChangesTotal.Add(float64(in.change.sliceEdits))
		// Under the changed slice's family, as upstream's proxier of that family alone observes it.
		for _, t := range in.change.triggers {
			if slices.Contains(p.families(), t.family) {
				p.metrics.NetworkProgrammingDuration.WithLabelValues(t.family.String()).Observe(now.Sub(t.at).Seconds())
			}
		}
	}
	p.markSynced()
	// One line per sync: its counts and time at Info, and with -v 4 where
	// the time went.
	fields := []zap.Field{zap.Bool("full", full), zap.Int("services", len(r.inputs)),
		zap.Int("kernelOps", done.Ops), zap.Int("failedObjects", failed), zap.Duration("took", elapsed)}
	ce := p.log.Check(zap.DebugLevel, "synced")
	if ce == nil {
		p.log.Info("synced", fields...)
		return
	}
	// Where a slow change went: waiting for a drift check's adopt, and the
	// kernel writes by kind.
	fields = append(fields, zap.Duration("lockWait", r.start.Sub(called)), zap.Duration("writeAddresses", done.Times.Addresses),
		zap.Duration("writeEntries", done.Times.Entries), zap.Duration("writeVirtualServers", done.Times.VirtualServers))
	if full {
		fields = append(fields, zap.Duration("setup", read.Setup), zap.Duration("read", read.Read), zap.Duration("adopt", read.Adopt))
		if read.Adopted() {
			t := read.Stats()
			fields = append(fields, zap.Duration("readVirtualServers", t.VirtualServers), zap.Duration("readRealServers", t.RealServers),
				zap.Duration("readAddresses", t.Addresses), zap.Duration("readSets", t.Sets),
				zap.Int("realServersOf", t.RealServersOf), zap.Bool("listed", t.Listed), zap.Int("setsUnlisted", t.SetsUnlisted))
		}
	}
	ce.Write(fields...)
}

// sync applies the changed Services. When a drift check is due it starts
// one, on its own goroutine unless inline; when one has ended, its read has
// been adopted, so the apply also repairs drift. It returns the check that
// ended, if any, and its read's error: write errors are the objects'
// status, not the sync's.
func (p *Proxier) sync(inputs []serviceInput, first, setUp, due, inline bool) (*reconciler.CheckResult, error) {
	// Record what is wanted before touching the kernel: the inputs are gone
	// from the tracker, so a kernel failure must not lose them. (The
	// critical Services' are recorded again: their input may be newer than
	// programCritical's, and an unchanged state writes nothing.)
	p.setsInUse = p.rec.Record(p.changes(inputs, p.changeTracker.peek))
	var read *reconciler.CheckResult
	switch {
	case first || (due && inline && !p.rec.Checking()):
		// Nothing may be written before the kernel is adopted.
		setup := p.setupWithReadBack
		if setUp {
			setup = nil
		}
		r := p.rec.CheckNow(setup)
		read = &r
	case due && !p.rec.Checking():
		p.rec.StartCheck(p.setupWithReadBack, p.runner.Trigger)
	}
	if read == nil {
		read = p.rec.CheckDone(inline)
	}
	if read != nil && read.SetUp {
		p.recordSetup(read.SetupErr)
	}
	var readErr error
	if read != nil {
		readErr = read.Err
	}
	if read != nil && !read.Adopted() {
		if first {
			// Nothing may be written before the kernel is adopted.
			return read, readErr
		}
		read = nil // changes are still applied; the drift check is retried
	}
	// Critical Services (default/kubernetes, cluster DNS) go first: node
	// agents wait on them, and a cold start at scale is long. After the
	// first sync, so do the Services that changed: a drift check's repairs
	// or a big Service's leftover deletes must not hold another Service's
	// change back for a second sync.
	p.syncGlueAhead()
	p.rec.Sync(p.writtenFirst(inputs, first), read)
	p.syncGlue()
	p.syncHealthChecks()
	return read, readErr
}

// writtenFirst names the Services a sync writes before other dirty
// objects: the critical ones, and after the first sync the changed ones.
func (p *Proxier) writtenFirst(inputs []serviceInput, first bool) []types.NamespacedName {
	if first {
		return p.cfg.CriticalServices
	}
	names := slices.Clone(p.cfg.CriticalServices)
	for _, in := range inputs {
		if in.change != nil {
			names = append(names, in.name)
		}
	}
	return names
}

// programCritical writes the critical Services at the start of the first
// sync, before the other Services are computed and the whole kernel is read
// (seconds at 10k Services): it computes them alone, sets the kernel up and
// reads just their objects. It runs before the tracker's inputs are taken,
// from a peek at the critical ones, and returns whether the kernel is set up
// (setUp: it already was).
func (p *Proxier) programCritical(inputs []serviceInput, setUp bool) bool {
	start := time.Now()
	var names []types.NamespacedName
	var critical []serviceInput
	for _, in := range inputs {
		if slices.Contains(p.cfg.CriticalServices, in.name) {
			critical = append(critical, in)
			names = append(names, in.name)
		}
	}
	if len(names) == 0 {
		return setUp
	}
	p.setsInUse = p.rec.Record(p.changes(critical, nil))
	// The glue is not read back here: that can wait for the first drift check.
	if !setUp {
		err := p.setupKernel(false)
		p.recordSetup(err)
		setUp = writable(err)
	}
	if setUp {
		// Only added to: the other Services' rules stay until the full sync
		// knows whether they still are wanted.
		p.syncGlueAhead()
	}
	n, errs, err := p.rec.ProgramFirst(names)
	if err != nil {
		p.log.Warn("could not read the critical services' kernel objects; they wait for the full read", zap.Error(err))
		return setUp
	}
	p.log.Info("critical services programmed", zap.Int("kernelObjects", n), zap.Int("failed", len(errs)),
		zap.Duration("took", time.Since(start)))
	return setUp
}

// warnMissingCritical warns of critical Services the first sync finds no
// input for.
func (p *Proxier) warnMissingCritical(inputs []serviceInput) {
	var absent []string
	for _, n := range p.cfg.CriticalServices {
		if !slices.ContainsFunc(inputs, func(in serviceInput) bool { return in.name == n && in.service != nil }) {
			absent = append(absent, n.String())
		}
	}
	if len(absent) > 0 {
		p.log.Warn("critical services not found; check --critical-services (a Service created later is programmed like any other)",
			zap.Strings("missing", absent))
	}
}

// programCriticalEarly programs the critical Services from their own
// informers while the cluster-wide caches still list, and again whenever
// they change before then. The first sync programs them once more from the
// cluster-wide caches, writing only what differs.
func (p *Proxier) programCriticalEarly() (applied bool) {
	if !p.nodeIPs.read {
		if err := p.refreshNodeIPs(); err != nil {
			p.waitForNodeAddrs(err)
			return false
		}
	}
	inputs := p.critical.take(false)
	if len(inputs) == 0 {
		return false
	}
	if ok := p.takeEarlySetup(p.chainsFor(inputs)); !p.setup.done {
		p.setup.done = ok
	}
	p.setup.done = p.programCritical(inputs, p.setup.done)
	out := p.rec.Outcome()
	p.reportObjects(out)
	if retry := status.Earliest(out.RetryAt, p.setup.status.NextRetry()); !retry.IsZero() {
		p.runner.RetryAt(retry)
	}
	return true
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
	if p.nodeIPs.setNode(factsOf(node)) {
		p.runner.Trigger()
	}
}
