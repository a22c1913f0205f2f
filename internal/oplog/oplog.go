// Package oplog records the writes a fake kernel table performs, so unit
// tests can assert exactly which operations a change caused.
package oplog

import "sync"

// Log is safe for concurrent use; the zero value is ready.
type Log struct {
	mu  sync.Mutex
	ops []string
}

// Record appends one operation.
func (l *Log) Record(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ops = append(l.ops, op)
}

// Take returns the operations recorded so far and clears the record.
func (l *Log) Take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ops := l.ops
	l.ops = nil
	return ops
}
