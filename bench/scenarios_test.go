package main

import (
	"testing"
	"time"
)

func TestSetLatenciesSplitsTheAPIAnswerOff(t *testing.T) {
	// Three samples: sent→kernel and answer→kernel; the answer is their gap.
	fromSent := []time.Duration{30 * time.Millisecond, 12 * time.Millisecond, 250 * time.Millisecond}
	fromWritten := []time.Duration{10 * time.Millisecond, 2 * time.Millisecond, 50 * time.Millisecond}
	var r record
	setLatencies(&r, fromSent, fromWritten)
	if r.AnswerP50ms == nil || r.AnswerP99ms == nil {
		t.Fatal("answer percentiles not set")
	}
	if *r.AnswerP50ms != 20 || *r.AnswerP99ms != 200 {
		t.Errorf("answer p50 / p99 = %v / %v ms, want 20 / 200", *r.AnswerP50ms, *r.AnswerP99ms)
	}
	if *r.P99ms != 250 || *r.AfterWriteP99ms != 50 {
		t.Errorf("p99 from sent / written = %v / %v ms, want 250 / 50", *r.P99ms, *r.AfterWriteP99ms)
	}
}
