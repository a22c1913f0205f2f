package reconciler

import (
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// driftCheck reads the whole kernel and gives the read to the reconciler's
// belief, marking dirty what drifted, so that the next apply repairs it.
// It is one sequence (begin, plan the share, set up, read, adopt), run on
// the caller's goroutine when nothing may be written before it ends (the
// first sync), or on a goroutine of its own beside syncs. It takes the
// reconciler's lock itself and releases it while it reads and, a slice at a
// time, while it plans and adopts, so that syncs keep writing meanwhile.
type driftCheck struct {
	r *Reconciler
	// inFlight delivers the read of a check on its own goroutine; nil when
	// none is running or its read has been taken.
	inFlight chan CheckResult
	// ahead delivers ReadAhead's read to the next CheckNow, which adopts
	// it, marked Stale if older than aheadMaxAge; nil when there is none.
	ahead       chan CheckResult
	aheadMaxAge time.Duration
}

// CheckResult is the outcome of a drift check.
type CheckResult struct {
	view *kernelView // nil if the read failed
	// written are the virtual servers written during the read and its
	// adoption.
	written map[ipvs.Key]bool
	Err     error
	// SetUp says the check ran a setup first, with outcome SetupErr.
	SetUp    bool
	SetupErr error
	// Stale says the read is ReadAhead's and was older than its maxAge
	// when adopted: the caller should check again soon.
	Stale   bool
	Started time.Time
	// Setup, Read and Adopt are how long the setup, the read and its
	// adoption took, for logs.
	Setup, Read, Adopt time.Duration
}

// Adopted says the read succeeded and the belief took it: the next Sync
// repairs the drift it found.
func (c *CheckResult) Adopted() bool { return c.view != nil }

// ReadStats is where a drift check's read spent its time, for logs.
type ReadStats struct {
	VirtualServers, RealServers, Addresses, Sets time.Duration
	// RealServersOf is how many virtual servers' real servers were read;
	// Listed says the virtual servers were listed whole, SetsUnlisted how
	// many sets' entries were left unread (their counts matched).
	RealServersOf int
	Listed        bool
	SetsUnlisted  int
}

// Stats is the read's ReadStats; zero if it failed.
func (c *CheckResult) Stats() ReadStats {
	v := c.view
	if v == nil {
		return ReadStats{}
	}
	return ReadStats{VirtualServers: v.took.virtualServers, RealServers: v.took.realServers, Addresses: v.took.addresses,
		Sets: v.took.sets, RealServersOf: v.realServersOf, Listed: v.only == nil, SetsUnlisted: len(v.unreadSets)}
}

// CheckNow runs a drift check on the caller's goroutine; setup, if not nil,
// runs before the read (the kernel setup with its read-back). Without a
// setup it adopts ReadAhead's read, if there is one, rather than reading
// again; one older than ReadAhead's maxAge is marked Stale. A failed
// read-ahead is read again.
func (r *Reconciler) CheckNow(setup func() error) CheckResult {
	if ahead := r.drift.ahead; ahead != nil {
		r.drift.ahead = nil
		read := <-ahead
		r.mu.Lock()
		if setup == nil && read.view != nil {
			defer r.mu.Unlock()
			read.Stale = time.Since(read.Started) > r.drift.aheadMaxAge
			// Timed from its read's end: the wait for the informers is
			// not the check's.
			read.Started = time.Now().Add(-read.Read)
			start := time.Now()
			read.written, read.Err = r.adopt(read.view, r.pacer(nil))
			read.Adopt = time.Since(start)
			return read
		}
		r.endRead()
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.beginRead()
	r.mu.Unlock()
	return r.drift.run(setup)
}

// ReadAhead starts reading the whole kernel on a goroutine of its own, for
// the next CheckNow to adopt: at start-up the read then overlaps the
// informers' list instead of following it (seconds at 10k Services, on a
// restart). What is written meanwhile (the critical Services) is marked,
// as during any check, and adopt leaves it alone. A read that started
// more than maxAge before that CheckNow (the informers took long, and
// another program may have written since) is adopted all the same but
// marked Stale: reading again first would put the whole read on the
// restart's critical path, while what another program changed is drift
// like any other, found by the check the caller runs next. Call it before
// the first check, from the goroutine that calls CheckNow, with no check
// running.
func (r *Reconciler) ReadAhead(maxAge time.Duration) {
	r.mu.Lock()
	r.beginRead()
	r.mu.Unlock()
	ahead := make(chan CheckResult, 1)
	r.drift.ahead, r.drift.aheadMaxAge = ahead, maxAge
	go func() {
		read := CheckResult{Started: time.Now()}
		read.view, read.Err = r.readKernel()
		read.Read = time.Since(read.Started)
		ahead <- read
	}()
}

// StartCheck starts a drift check on its own goroutine and calls done when
// its read has been adopted; CheckDone then returns it.
func (r *Reconciler) StartCheck(setup func() error, done func()) {
	r.mu.Lock()
	r.beginRead()
	r.mu.Unlock()
	reads := make(chan CheckResult, 1)
	r.drift.inFlight = reads
	go func() {
		reads <- r.drift.run(setup)
		done()
	}()
}

// Checking says whether a check started by StartCheck has not been taken.
func (r *Reconciler) Checking() bool { return r.drift.inFlight != nil }

// CheckDone returns the check StartCheck started once it has ended, waiting
// for it if wait is set; nil if there is none or, without wait, it runs yet.
func (r *Reconciler) CheckDone(wait bool) *CheckResult {
	if r.drift.inFlight == nil {
		return nil
	}
	var read CheckResult
	if wait {
		read = <-r.drift.inFlight
	} else {
		select {
		case read = <-r.drift.inFlight:
		default:
			return nil
		}
	}
	r.drift.inFlight = nil
	return &read
}

// run is the check's sequence, after beginRead.
func (d *driftCheck) run(setup func() error) CheckResult {
	r := d.r
	r.mu.Lock()
	r.planShare()
	r.mu.Unlock()

	read := CheckResult{Started: time.Now(), SetUp: setup != nil}
	if setup != nil {
		read.SetupErr = setup()
	}
	read.Setup = time.Since(read.Started)
	read.view, read.Err = r.readKernel()
	read.Read = time.Since(read.Started) - read.Setup

	r.mu.Lock()
	defer r.mu.Unlock()
	if read.view == nil {
		r.endRead()
		return read
	}
	start := time.Now()
	read.written, read.Err = r.adopt(read.view, r.pacer(nil))
	read.Adopt = time.Since(start)
	return read
}
