package proxier

import (
	"context"
	"time"
)

// runBurst is how many runs may follow each other without waiting
// minInterval, as upstream's bounded-frequency runner allows.
const runBurst = 2

// runner calls fn when triggered, at most runBurst times in a row and
// otherwise once per minInterval, and at least once per maxInterval.
// Triggers that arrive while fn runs or waits collapse into one run.
//
// fn reports whether it applied changes. A run that did not (one that only
// starts or collects a drift check) gives its token back: the rate limit is
// there to batch changes, and charging it for drift checks made a change
// that followed one wait for the refill.
type runner struct {
	fn          func() (applied bool)
	minInterval time.Duration
	maxInterval time.Duration
	trigger     chan struct{}

	tokens float64 // runs allowed now, refilled at one per minInterval
	last   time.Time
	// retry is the one pending RetryAt timer; fn sets it, on Loop's goroutine.
	retry *time.Timer
}

func newRunner(fn func() bool, minInterval, maxInterval time.Duration) *runner {
	return &runner{fn: fn, minInterval: minInterval, maxInterval: maxInterval,
		trigger: make(chan struct{}, 1), tokens: runBurst}
}

// Trigger asks for a run soon; it never blocks.
func (r *runner) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// RetryAt asks for a run at t, for objects or a drift check that failed,
// in place of the run an earlier call asked for. Only fn may call it.
func (r *runner) RetryAt(t time.Time) {
	if r.retry != nil {
		r.retry.Stop()
	}
	r.retry = time.AfterFunc(time.Until(t), r.Trigger)
}

// wait returns how long the next run must wait for a token, taking it.
func (r *runner) wait(now time.Time) time.Duration {
	if r.minInterval <= 0 {
		return 0
	}
	if !r.last.IsZero() {
		r.tokens = min(runBurst, r.tokens+float64(now.Sub(r.last))/float64(r.minInterval))
	}
	r.last = now
	if r.tokens >= 1 {
		r.tokens--
		return 0
	}
	d := time.Duration((1 - r.tokens) * float64(r.minInterval))
	r.tokens = 0
	r.last = now.Add(d)
	return d
}

// refund returns the token the last run took.
func (r *runner) refund() {
	if r.minInterval > 0 {
		r.tokens = min(runBurst, r.tokens+1)
	}
}

// Loop runs until ctx is done.
func (r *runner) Loop(ctx context.Context) {
	timer := time.NewTimer(r.maxInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.trigger:
		case <-timer.C:
		}
		if d := r.wait(time.Now()); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
		if !r.fn() {
			r.refund()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(r.maxInterval)
	}
}
