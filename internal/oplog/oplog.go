// Package oplog is what the fake kernel tables share: the record of the
// writes they perform, so unit tests can assert exactly which operations a
// change caused, and one hook that sees every operation, reads included,
// before it runs, so a test can watch, fail or hold any of them.
//
// Operations are named as the fakes' TakeOps names them ("add-vs
// 10.96.0.1:80/TCP", "add-entry KUBE-CLUSTER-IP ..."); reads are "list-vs",
// "get-vs K", "list-rs K", "read-table", "list-addrs", "list-entries SET",
// "save" and "restore".
package oplog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// Hook sees an operation before it runs, outside the fake's lock, so it
// may block as a slow kernel does. The error it returns fails the
// operation as the kernel's refusal would; an error wrapping
// nlbatch.ErrOutcomeUnknown instead lets a write take effect and loses its
// answer, as a lost acknowledgement does.
type Hook func(op string) error

// Log is safe for concurrent use; the zero value is ready.
type Log struct {
	mu   sync.Mutex
	ops  []string
	hook Hook
}

// SetHook makes h see every later operation; nil removes it. Safe while
// other goroutines use the fake.
func (l *Log) SetHook(h Hook) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.hook = h
}

// Begin passes op to the hook. fail is the error that fails op; answer,
// for a write that is to take effect, is what it answers instead of nil.
func (l *Log) Begin(op string) (answer, fail error) {
	l.mu.Lock()
	h := l.hook
	l.mu.Unlock()
	if h == nil {
		return nil, nil
	}
	err := h(op)
	if errors.Is(err, nlbatch.ErrOutcomeUnknown) {
		return err, nil
	}
	return nil, err
}

// Record appends a write that took effect.
func (l *Log) Record(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, op)
}

// Take returns the writes recorded so far and clears the record.
func (l *Log) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := l.ops
	l.ops = nil
	return ops
}

// Refuse is a hook that fails every operation starting with prefix, as
// the kernel refuses an object it will not take.
func Refuse(prefix string) Hook {
	return func(op string) error {
		if strings.HasPrefix(op, prefix) {
			return fmt.Errorf("%s: refused", op)
		}
		return nil
	}
}

// FailOnce is a hook that fails the first operation starting with prefix.
func FailOnce(prefix string) Hook {
	var mu sync.Mutex
	done := false
	return func(op string) error {
		mu.Lock()
		defer mu.Unlock()
		if done || !strings.HasPrefix(op, prefix) {
			return nil
		}
		done = true
		return fmt.Errorf("%s: injected failure", op)
	}
}

// FailWith is a hook that fails every operation starting with one of the
// prefixes with err, as a kernel whose dumps fail does.
func FailWith(err error, prefixes ...string) Hook {
	return func(op string) error {
		for _, p := range prefixes {
			if strings.HasPrefix(op, p) {
				return err
			}
		}
		return nil
	}
}

// Hang is a hook that holds every operation starting with one of the
// prefixes until c is closed, then fails it as a process killed at its
// deadline.
func Hang(c <-chan struct{}, prefixes ...string) Hook {
	return func(op string) error {
		for _, p := range prefixes {
			if strings.HasPrefix(op, p) {
				<-c
				return fmt.Errorf("%s: killed at its deadline: %w", op, context.DeadlineExceeded)
			}
		}
		return nil
	}
}

// LoseAnswers is a hook that lets every write starting with prefix take
// effect and answers it with nlbatch.ErrOutcomeUnknown.
func LoseAnswers(prefix string) Hook {
	return func(op string) error {
		if strings.HasPrefix(op, prefix) {
			return fmt.Errorf("%s: %w", op, nlbatch.ErrOutcomeUnknown)
		}
		return nil
	}
}

// Counter is a hook that counts the operations by the word they start
// with ("list-rs", "add-vs", ...), and by whole name.
type Counter struct {
	mu     sync.Mutex
	byWord map[string]int
	byOp   map[string]int
}

// Hook is c's hook.
func (c *Counter) Hook(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byWord == nil {
		c.byWord, c.byOp = map[string]int{}, map[string]int{}
	}
	word, _, _ := strings.Cut(op, " ")
	c.byWord[word]++
	c.byOp[op]++
	return nil
}

// Of is how many operations started with word.
func (c *Counter) Of(word string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byWord[word]
}

// Exactly is how many operations were op.
func (c *Counter) Exactly(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byOp[op]
}

// Named is the count of each operation that started with word.
func (c *Counter) Named(word string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for op, n := range c.byOp {
		if w, _, _ := strings.Cut(op, " "); w == word {
			out[op] = n
		}
	}
	return out
}

// Reset forgets the counts.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byWord, c.byOp = nil, nil
}
