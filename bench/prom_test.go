package main

import (
	"math"
	"testing"
)

func TestHistogramQuantileSinceEarlierScrape(t *testing.T) {
	before := series{
		`np_bucket{le="0.25"}`: 10, `np_bucket{le="0.5"}`: 10, `np_bucket{le="1"}`: 12, `np_bucket{le="+Inf"}`: 12,
	}
	after := series{
		`np_bucket{le="0.25"}`: 60, `np_bucket{le="0.5"}`: 100, `np_bucket{le="1"}`: 111, `np_bucket{le="+Inf"}`: 112,
	}
	h := after.histogram("np").since(before.histogram("np"))
	if h.total() != 100 {
		t.Fatalf("total %v, want 100", h.total())
	}
	// 50 of 100 new observations are in (0, 0.25]: the median is its top.
	if got := h.quantile(0.5); got != 0.25 {
		t.Errorf("p50 = %v, want 0.25", got)
	}
	// The 99th is the 9th of the 9 in (0.5, 1].
	if got := h.quantile(0.99); math.Abs(got-1) > 1e-9 {
		t.Errorf("p99 = %v, want 1", got)
	}
	// Beyond the last finite bound: that bound.
	if got := h.quantile(1); got != 1 {
		t.Errorf("p100 = %v, want 1", got)
	}
	if got := h.upperBound(0.5); got != 0.25 {
		t.Errorf("p50 bucket bound = %v, want 0.25", got)
	}
	if got := h.upperBound(0.99); got != 1 {
		t.Errorf("p99 bucket bound = %v, want 1", got)
	}
	if got := (histogram{}).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("empty histogram quantile = %v, want NaN", got)
	}
}

// TestHistogramSumsTheIPFamilies: a histogram labelled by IP family reads
// as one, and our full syncs are counted once, not once per family.
func TestHistogramSumsTheIPFamilies(t *testing.T) {
	m := series{
		`np_bucket{ip_family="IPv4",le="0.25"}`: 3, `np_bucket{ip_family="IPv4",le="+Inf"}`: 4,
		`np_bucket{ip_family="IPv6",le="0.25"}`: 0, `np_bucket{ip_family="IPv6",le="+Inf"}`: 2,
		`kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}`: 5,
		`kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv6"}`: 5,
	}
	h := m.histogram("np")
	if len(h) != 2 || h.total() != 6 || h[0].count != 3 {
		t.Errorf("histogram %v, want 3 of 6 within 0.25", h)
	}
	if got := syncCount(m); got != 5 {
		t.Errorf("syncCount = %v, want 5", got)
	}
}
