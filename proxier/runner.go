package proxier

import (
	"context"
	"time"
)

// runner calls fn when triggered, at most once per minInterval, and at least
// once per maxInterval. Triggers that arrive while fn runs or while it waits
// out minInterval collapse into one run.
type runner struct {
	fn          func()
	minInterval time.Duration
	maxInterval time.Duration
	trigger     chan struct{}
}

func newRunner(fn func(), minInterval, maxInterval time.Duration) *runner {
	return &runner{fn: fn, minInterval: minInterval, maxInterval: maxInterval, trigger: make(chan struct{}, 1)}
}

// Trigger asks for a run soon; it never blocks.
func (r *runner) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// RetryAfter asks for a run after d, for a sync that failed.
func (r *runner) RetryAfter(d time.Duration) {
	time.AfterFunc(d, r.Trigger)
}

// Loop runs until ctx is done.
func (r *runner) Loop(ctx context.Context) {
	timer := time.NewTimer(r.maxInterval)
	defer timer.Stop()
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.trigger:
		case <-timer.C:
		}
		if wait := r.minInterval - time.Since(last); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		last = time.Now()
		r.fn()
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(r.maxInterval)
	}
}
