package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// statsScrapes is how many scrapes ipvsStats averages over.
const statsScrapes = 3

// driftShareMax is how many virtual servers' real servers a drift check
// dumps per sync period at most (reconciler.realServerDumpsMax).
const driftShareMax = 2500

// ipvsStats measures what --ipvs-stats costs a scrape of /metrics/ipvs on
// the cold start's kernel, gzipped as Prometheus asks for it: the first
// scrape, which reads every virtual and real server's statistics and
// compresses all, then the scrapes after it, each with its text, whose read dumps at most metrics.StatsDumpsMax
// virtual servers' real servers again (metrics.RollingStats) and takes the
// rest from a drift check's share of dumps, made anyway. It runs in this
// process, so that the figure is the feature's alone; its CPU profile
// (profiles/*-stats-cpu-*) holds the drift check's shares too. The
// Services' names are left out of the labels: the proxier copies them from
// its tables, O(virtual servers), under its lock.
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
	// Between two scrapes the proxier's drift check dumps a share of the
	// virtual servers' real servers (2,500 at most, as
	// reconciler.realServerDumpsMax) and hands their statistics on: this
	// reads such a share before each scrape, outside the scrape's figure,
	// once before the first scrape taps the table (RollingStats.Read) and
	// then tapped, to show what the tap adds.
	list, err := nl.VirtualServers()
	if err != nil || len(list) == 0 {
		rec.Note = fmt.Sprintf("no virtual server to read: %v", err)
		return rec
	}
	next := 0
	driftShare := func() time.Duration {
		c := cpu()
		for range min(driftShareMax, len(list)) {
			if _, err := nl.RealServers(list[next%len(list)].Key); err != nil {
				s.logf("ipvs stats: drift-check read: %v", err)
			}
			next++
		}
		return cpu() - c
	}
	untapped := driftShare()
	rolling := &metrics.RollingStats{Source: nl}
	h := metrics.IPVSStats{Read: rolling.Read, Owners: func() map[ipvs.Key]string { return nil }, MinInterval: -1}.Handler()
	scrape := func() (cpuUsed, wall time.Duration, body int) {
		c0, t0 := cpu(), time.Now()
		w := httptest.NewRecorder()
		req := httptest.NewRequest("GET", metrics.IPVSStatsPath, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		h.ServeHTTP(w, req)
		return cpu() - c0, time.Since(t0), w.Body.Len()
	}
	// The first scrape reads every real server and compresses every run
	// of them; the ones after, what an operator pays each time, are the
	// figure (every scrape reads: MinInterval -1).
	firstCPU, firstWall, _ := scrape()
	stopProfile := s.selfCPUProfile("stats-cpu-00")
	var scrapeCPU, tapped, scrapeWall time.Duration
	var body int
	var series int
	for range statsScrapes {
		tapped += driftShare()
		c, wall, b := scrape()
		scrapeCPU, scrapeWall, body = scrapeCPU+c, scrapeWall+wall, b
	}
	scrapeCPU, scrapeWall, tapped = scrapeCPU/statsScrapes, scrapeWall/statsScrapes, tapped/statsScrapes
	stopProfile()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", metrics.IPVSStatsPath, nil))
	series = strings.Count(w.Body.String(), "\nkube_ipvs_proxy_ipvs_")
	rec.CPUs = ptr(scrapeCPU.Seconds())
	rec.P50ms = ptr(float64(scrapeWall.Microseconds()) / 1000)
	rec.Samples = ptr(series)
	rec.Note = fmt.Sprintf("per scrape, over %d after the first: %d series, %.1f MB gzipped (%.1f MB plain); the first scrape (every real server read, "+
		"every run compressed) %.2f CPU s, %.0f ms; a drift check's share of real-server dumps before each scrape, not counted: "+
		"%.2f CPU s handing on its statistics, %.2f without",
		statsScrapes, series, float64(body)/1e6, float64(w.Body.Len())/1e6, firstCPU.Seconds(), float64(firstWall.Microseconds())/1000,
		tapped.Seconds(), untapped.Seconds())
	s.logf("ipvs stats: %.2f CPU s and %.0f ms per scrape, %d series; %s", *rec.CPUs, *rec.P50ms, series, rec.Note)
	return rec
}

// selfCPUProfile profiles this process (a scenario run in-process) into
// the results' profiles directory until the returned function is called.
func (s *session) selfCPUProfile(file string) (stop func()) {
	dir := filepath.Join(s.o.out, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d-%s.pb.gz", s.name, s.n, file)))
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		s.logf("profile %s: %v", file, err)
		_ = f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
