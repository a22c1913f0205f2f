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

// ipvsStats measures what --ipvs-stats costs a scrape of /metrics/ipvs on
// the cold start's kernel, gzipped as Prometheus asks for it: the first
// read, of every virtual and real server's statistics, then the whole
// scrape with its text, whose read dumps at most metrics.StatsDumpsMax
// virtual servers' real servers again (metrics.RollingStats). It runs in this process, so that the figure is the feature's
// alone. The Services' names are left out of the labels: the proxier
// copies them from its tables, O(virtual servers), under its lock.
func (s *session) ipvsStats() record {
	rec := s.record("ipvs-stats")
	nl, err := ipvs.NewNetlink()
	if err != nil {
		rec.Note = err.Error()
		return rec
	}
	defer nl.Close()
	cpu := func() time.Duration {
		u, _ := framework.SelfUsage()
		return u.CPU
	}
	rolling := &metrics.RollingStats{Source: nl}
	c0, t0 := cpu(), time.Now()
	if _, err := rolling.Read(); err != nil {
		rec.Note = err.Error()
		return rec
	}
	readCPU, readWall := cpu()-c0, time.Since(t0)
	// Every scrape reads: the cost of one is what this measures.
	h := metrics.IPVSStats{Read: rolling.Read, Owners: func() map[ipvs.Key]string { return nil }, MinInterval: -1}.Handler()
	c0, t0 = cpu(), time.Now()
	var body int
	var series int
	for range statsScrapes {
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", metrics.IPVSStatsPath, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		h.ServeHTTP(w, req)
		body = w.Body.Len()
	}
	scrapeCPU, scrapeWall := (cpu()-c0)/statsScrapes, time.Since(t0)/statsScrapes
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", metrics.IPVSStatsPath, nil))
	series = strings.Count(w.Body.String(), "\nkube_ipvs_proxy_ipvs_")
	rec.CPUs = ptr(scrapeCPU.Seconds())
	rec.P50ms = ptr(float64(scrapeWall.Microseconds()) / 1000)
	rec.Samples = ptr(series)
	rec.Note = fmt.Sprintf("per scrape, over %d: %d series, %.1f MB gzipped (%.1f MB plain); the first read (every real server) %.2f CPU s, %.0f ms",
		statsScrapes, series, float64(body)/1e6, float64(w.Body.Len())/1e6, readCPU.Seconds(), float64(readWall.Microseconds())/1000)
	s.logf("ipvs stats: %.2f CPU s and %.0f ms per scrape, %d series; %s", *rec.CPUs, *rec.P50ms, series, rec.Note)
	return rec
}
