package main

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// statsScrapes is how many scrapes ipvsStats averages over.
const statsScrapes = 3

// ipvsStats measures what --ipvs-stats costs a scrape on the cold start's
// kernel: the read of every virtual and real server's statistics and their
// Prometheus text, as the proxier's /metrics makes them, run in this
// process so that the figure is the feature's alone. The Services' names
// are left out of the labels: the proxier copies them from its tables,
// O(virtual servers), under its lock.
func (s *session) ipvsStats() record {
	rec := s.record("ipvs-stats")
	nl, err := ipvs.NewNetlink()
	if err != nil {
		rec.Note = err.Error()
		return rec
	}
	defer nl.Close()
	m := metrics.New()
	m.ExportIPVSStats(metrics.IPVSStats{Read: nl.Stats, Owners: func() map[ipvs.Key]string { return nil }})
	h := m.Handler(nil)
	before, err := framework.SelfUsage()
	if err != nil {
		rec.Note = err.Error()
		return rec
	}
	start := time.Now()
	var body string
	for range statsScrapes {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		body = w.Body.String()
	}
	wall := time.Since(start) / statsScrapes
	after, _ := framework.SelfUsage()
	series := strings.Count(body, "\nkubeproxy_ipvs_")
	rec.CPUs = ptr((after.CPU - before.CPU).Seconds() / statsScrapes)
	rec.P50ms = ptr(float64(wall.Microseconds()) / 1000)
	rec.Samples = ptr(series)
	rec.Note = fmt.Sprintf("per scrape, over %d: %d series, %.1f MB of text", statsScrapes, series, float64(len(body))/1e6)
	s.logf("ipvs stats: %.2f CPU s and %.0f ms per scrape, %d series", *rec.CPUs, *rec.P50ms, series)
	return rec
}
