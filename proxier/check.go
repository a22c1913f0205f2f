package proxier

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
	r *reconciler
	// inFlight delivers the read of a check on its own goroutine; nil when
	// none is running or its read has been taken.
	inFlight chan kernelRead
}

// kernelRead is the outcome of a drift check.
type kernelRead struct {
	view *kernelView // nil if the read failed
	// written are the virtual servers written during the read and its
	// adoption.
	written map[ipvs.Key]bool
	err     error
	// setUp says the check ran a setup first, with outcome setupErr.
	setUp    bool
	setupErr error
	started  time.Time
	// setup, read and adopt are how long the setup, the read and its
	// adoption took, for logs.
	setup, read, adopt time.Duration
}

// checkNow runs a drift check on the caller's goroutine; setup, if not nil,
// runs before the read (the kernel setup with its read-back).
func (r *reconciler) checkNow(setup func() error) kernelRead {
	r.mu.Lock()
	r.beginRead()
	r.mu.Unlock()
	return r.drift.run(setup)
}

// startCheck starts a drift check on its own goroutine and calls done when
// its read has been adopted; checkDone then returns it.
func (r *reconciler) startCheck(setup func() error, done func()) {
	r.mu.Lock()
	r.beginRead()
	r.mu.Unlock()
	reads := make(chan kernelRead, 1)
	r.drift.inFlight = reads
	go func() {
		reads <- r.drift.run(setup)
		done()
	}()
}

// checking says whether a check started by startCheck has not been taken.
func (r *reconciler) checking() bool { return r.drift.inFlight != nil }

// checkDone returns the check startCheck started once it has ended, waiting
// for it if wait is set; nil if there is none or, without wait, it runs yet.
func (r *reconciler) checkDone(wait bool) *kernelRead {
	if r.drift.inFlight == nil {
		return nil
	}
	var read kernelRead
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
func (d *driftCheck) run(setup func() error) kernelRead {
	r := d.r
	r.mu.Lock()
	r.planShare()
	r.mu.Unlock()

	read := kernelRead{started: time.Now(), setUp: setup != nil}
	if setup != nil {
		read.setupErr = setup()
	}
	read.setup = time.Since(read.started)
	read.view, read.err = r.readKernel()
	read.read = time.Since(read.started) - read.setup

	r.mu.Lock()
	defer r.mu.Unlock()
	if read.view == nil {
		r.endRead()
		return read
	}
	start := time.Now()
	read.written, read.err = r.adopt(read.view)
	read.adopt = time.Since(start)
	return read
}
