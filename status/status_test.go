package status

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// An object made due at once (its Service changed) still asks for a run:
// nextRetry's zero means nothing failed.
func TestStatusDueAtOnceStillAsksForARetry(t *testing.T) {
	s := NewTable[string](KindSetup, time.Minute)
	now := time.Now()
	s.Fail("x", errors.New("refused"), now, types.NamespacedName{})
	if got := s.NextRetry(); !got.Equal(now.Add(RetryFirst)) {
		t.Fatalf("next retry %v, want %v", got, now.Add(RetryFirst))
	}
	s.RetryNow("x")
	if got := s.NextRetry(); got.IsZero() || got.After(now) || s.Waiting("x", now) {
		t.Fatalf("next retry %v after retryNow, want due at once and not zero", got)
	}
	s.OK("x")
	if got := s.NextRetry(); !got.IsZero() {
		t.Fatalf("next retry %v with nothing failed, want zero", got)
	}
}
