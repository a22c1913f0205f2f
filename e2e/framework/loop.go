package framework

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Loop sends a request every interval until stopped, and keeps the time
// of every failure: a client looping through a Service while the cluster
// changes.
type Loop struct {
	Name string
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu       sync.Mutex
	sent     int
	failures []Failure
}

// Failure is one failed request of a Loop.
type Failure struct {
	At  time.Time
	Err error
}

// StartLoop calls send every interval until End.
func StartLoop(name string, interval time.Duration, send func() (string, error)) *Loop {
	l := &Loop{Name: name, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			_, err := send()
			l.mu.Lock()
			l.sent++
			if err != nil {
				l.failures = append(l.failures, Failure{time.Now(), err})
			}
			l.mu.Unlock()
		}
	}()
	return l
}

// End stops the loop (again is a no-op) and returns how many requests it
// sent and the failures.
func (l *Loop) End() (int, []Failure) {
	l.once.Do(func() { close(l.stop) })
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent, l.failures
}

// Between counts the failures in [from, to).
func Between(fs []Failure, from, to time.Time) int {
	n := 0
	for _, f := range fs {
		if !f.At.Before(from) && f.At.Before(to) {
			n++
		}
	}
	return n
}

// Spans says, for failures, how long after from the first and last came
// and what the first was.
func Spans(fs []Failure, from time.Time) string {
	if len(fs) == 0 {
		return "none"
	}
	return fmt.Sprintf("%s to %s after the start, first: %v", fs[0].At.Sub(from).Round(100*time.Millisecond),
		fs[len(fs)-1].At.Sub(from).Round(100*time.Millisecond), fs[0].Err)
}

// RequireNoFailures ends the loops and fails the test if one saw any
// failure, quoting the first.
func RequireNoFailures(t *testing.T, loops ...*Loop) {
	t.Helper()
	for _, l := range loops {
		sent, fails := l.End()
		t.Logf("%s: %d requests, %d failed", l.Name, sent, len(fails))
		if len(fails) > 0 {
			t.Errorf("%s: %d of %d requests failed; first at %s: %v", l.Name, len(fails), sent,
				fails[0].At.Format("15:04:05.000"), fails[0].Err)
		}
	}
}

// LogFailures ends the loops and logs what failed: for a proxier that is
// not held to none (upstream kube-proxy across its own restart).
func LogFailures(t *testing.T, why string, loops ...*Loop) {
	t.Helper()
	for _, l := range loops {
		sent, fails := l.End()
		t.Logf("%s: %d requests, %d failed %s (logged, not required)", l.Name, sent, len(fails), why)
		if len(fails) > 0 {
			t.Logf("%s: first at %s: %v", l.Name, fails[0].At.Format("15:04:05.000"), fails[0].Err)
		}
	}
}
