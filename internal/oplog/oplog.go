// Package oplog records the writes a fake kernel table performs, so unit
// tests can assert exactly which operations a change caused, and refuses
// the writes a test names, as a kernel refuses an object.
package oplog

import (
	"fmt"
	"strings"
	"sync"
)

// Log is safe for concurrent use; the zero value is ready.
type Log struct {
	mu     sync.Mutex
	ops    []string
	refuse string
}

// Record appends one operation, or refuses it (recording nothing) if it
// starts with the prefix given to Refuse.
func (l *Log) Record(op string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse != "" && strings.HasPrefix(op, l.refuse) {
		return fmt.Errorf("%s: refused", op)
	}
	l.ops = append(l.ops, op)
	return nil
}

// Refuse makes every later operation starting with prefix fail, until
// Refuse("") accepts them again.
func (l *Log) Refuse(prefix string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refuse = prefix
}

// Take returns the operations recorded so far and clears the record.
func (l *Log) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := l.ops
	l.ops = nil
	return ops
}
