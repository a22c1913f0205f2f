package proxier

import (
	"context"
	"testing"
	"time"
)

func TestRunnerRateLimitsWithBurst(t *testing.T) {
	r := newRunner(nil, time.Second, time.Minute)
	now := time.Unix(0, 0)
	if first, second := r.wait(now), r.wait(now); first != 0 || second != 0 {
		t.Fatalf("the first two runs may go at once, waited %s and %s", first, second)
	}
	if d := r.wait(now); d != time.Second {
		t.Fatalf("third run waits %s, want 1s", d)
	}
	if d := r.wait(now.Add(time.Second)); d != time.Second {
		t.Fatalf("sustained rate is one per min interval, got wait %s", d)
	}
	if d := r.wait(now.Add(10 * time.Second)); d != 0 {
		t.Fatalf("after a quiet spell the burst is back, got wait %s", d)
	}
}

func TestRunnerCollapsesTriggersDuringARun(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	runs := 0
	r := newRunner(func() bool {
		runs++
		started <- struct{}{}
		<-release
		return true
	}, 0, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Loop(ctx); close(done) }()

	r.Trigger()
	<-started
	for i := 0; i < 10; i++ {
		r.Trigger() // arrive while the first run is busy
	}
	release <- struct{}{}
	<-started // exactly one more run for the ten triggers
	cancel()
	release <- struct{}{}
	<-done
	select {
	case <-started:
		t.Fatal("more than one run for triggers that arrived during a run")
	default:
	}
	if runs != 2 {
		t.Fatalf("runs = %d, want 2", runs)
	}
}

// Runs that apply no changes (a drift check's start or end) must not make
// the next change wait for the rate limit.
func TestRunnerRefundsRunsWithoutChanges(t *testing.T) {
	ran := make(chan bool)
	changes := []bool{false, false, false, true, true}
	i := 0
	r := newRunner(func() bool {
		applied := changes[i]
		i++
		ran <- applied
		return applied
	}, time.Hour, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Loop(ctx); close(done) }()
	for n := range changes {
		r.Trigger()
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d waited for the rate limit after %d runs without changes", n+1, n)
		}
	}
	cancel()
	<-done
	if d := r.wait(time.Now()); d < 30*time.Minute {
		t.Fatalf("after two runs with changes the burst is spent, but the next run waits only %s", d)
	}
}
