package main

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// series is one scrape of the proxier's metrics.
type series framework.Series

func scrape() (series, error) {
	m, err := framework.Scrape()
	return series(m), err
}

// value is an unlabelled sample, or the sum over label sets.
func (s series) value(name string) float64 {
	var sum float64
	for k, v := range s {
		if k == name || strings.HasPrefix(k, name+"{") {
			sum += v
		}
	}
	return sum
}

// bucket is one cumulative histogram bucket.
type bucket struct {
	le    float64
	count float64
}

// histogram is a Prometheus histogram's cumulative buckets, ascending.
type histogram []bucket

// histogram sums the buckets of every label set by bound, as PromQL's
// sum by (le): the proxiers label theirs by IP family.
func (s series) histogram(name string) histogram {
	byBound := map[float64]float64{}
	for k, v := range s {
		if !strings.HasPrefix(k, name+"_bucket{") {
			continue
		}
		_, rest, ok := strings.Cut(k, `le="`)
		le, _, _ := strings.Cut(rest, `"`)
		bound, err := strconv.ParseFloat(le, 64)
		if ok && err == nil {
			byBound[bound] += v
		}
	}
	var h histogram
	for le, n := range byBound {
		h = append(h, bucket{le, n})
	}
	sort.Slice(h, func(i, j int) bool { return h[i].le < h[j].le })
	return h
}

// since is the histogram of the observations made after an earlier scrape.
func (h histogram) since(before histogram) histogram {
	out := append(histogram(nil), h...)
	for i := range out {
		for _, b := range before {
			if b.le == out[i].le {
				out[i].count -= b.count
			}
		}
	}
	return out
}

// upperBound is the upper bound of the bucket holding the q-th observation:
// what a coarse histogram can honestly say ("p99 ≤ 0.25 s"). NaN without
// observations, +Inf beyond the last finite bound.
func (h histogram) upperBound(q float64) float64 {
	n := h.total()
	if n == 0 {
		return math.NaN()
	}
	for _, b := range h {
		if b.count >= q*n {
			return b.le
		}
	}
	return math.Inf(1)
}

func (h histogram) total() float64 {
	if len(h) == 0 {
		return 0
	}
	return h[len(h)-1].count
}

// quantile interpolates within the bucket holding the q-th observation, as
// PromQL's histogram_quantile does; observations beyond the last finite
// bound report that bound. NaN without observations.
func (h histogram) quantile(q float64) float64 {
	n := h.total()
	if n == 0 {
		return math.NaN()
	}
	rank := q * n
	lower, below := 0.0, 0.0
	for _, b := range h {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower
			}
			in := b.count - below
			if in == 0 {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/in
		}
		lower, below = b.le, b.count
	}
	return lower
}
