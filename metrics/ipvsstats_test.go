package metrics

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

func TestIPVSStatsAreSeriesPerVirtualAndRealServer(t *testing.T) {
	key := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Port: 80, Protocol: ipvs.TCP}
	var fail error
	h := IPVSStats{
		Read: func() ([]ipvs.VirtualServerStats, error) {
			return []ipvs.VirtualServerStats{{Key: key, Counters: ipvs.Counters{Connections: 7, BytesIn: 700},
				Reals: []ipvs.RealServerStats{
					{ID: netip.MustParseAddrPort("10.244.0.1:8080"), ActiveConns: 2, InactiveConns: 1,
						Counters: ipvs.Counters{Connections: 7, PacketsIn: 10, PacketsOut: 9, BytesIn: 700, BytesOut: 1 << 40}},
					{ID: netip.MustParseAddrPort("10.244.0.2:8080")}}}}, fail
		},
		Owners:      func() map[ipvs.Key]string { return map[ipvs.Key]string{key: `ns/a"b`} },
		MinInterval: -1, // every scrape reads
	}.Handler()
	rs := `ns/a"b 10.96.0.1:80 TCP 10.244.0.1:8080`
	for _, gz := range []bool{false, true} {
		got := scrapeText(t, h, gz)
		for series, want := range map[string]float64{
			"kube_ipvs_proxy_ipvs_real_server_active_connections " + rs:                                            2,
			"kube_ipvs_proxy_ipvs_real_server_inactive_connections " + rs:                                          1,
			"kube_ipvs_proxy_ipvs_real_server_packets_in_total " + rs:                                              10,
			"kube_ipvs_proxy_ipvs_real_server_bytes_out_total " + rs:                                               1 << 40,
			"kube_ipvs_proxy_ipvs_real_server_connections_total " + strings.Replace(rs, "0.1:8080", "0.2:8080", 1): 0,
			`kube_ipvs_proxy_ipvs_virtual_server_connections_total ns/a"b 10.96.0.1:80 TCP`:                        7,
			`kube_ipvs_proxy_ipvs_virtual_server_bytes_in_total ns/a"b 10.96.0.1:80 TCP`:                           700,
		} {
			if v, ok := got[series]; !ok || v != want {
				t.Errorf("gzip %v: %s = %v (present %v), want %v", gz, series, v, ok, want)
			}
		}
		if len(got) != 5+2*7+1 {
			t.Errorf("gzip %v: %d series, want 5 per virtual server, 7 per real server and the read's duration", gz, len(got))
		}
	}

	// A failed read fails the scrape: no series stop silently.
	fail = errors.New("netlink: interrupted")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", IPVSStatsPath, nil))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "interrupted") {
		t.Errorf("after a failed read: %d %q, want 503 with the error", w.Code, w.Body.String())
	}
}

// Scrapes that come at once share one read, and a read younger than the
// minimum interval is served again: 32 concurrent scrapes cost one full
// netlink read, not 32 (5 CPU seconds each at 10k Services).
func TestConcurrentScrapesShareOneRead(t *testing.T) {
	var reads atomic.Int32
	h := IPVSStats{
		Read: func() ([]ipvs.VirtualServerStats, error) {
			reads.Add(1)
			time.Sleep(50 * time.Millisecond)
			return nil, nil
		},
		Owners:      func() map[ipvs.Key]string { return nil },
		MinInterval: 200 * time.Millisecond,
	}.Handler()
	scrape := func() int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", IPVSStatsPath, nil))
		return w.Code
	}
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if code := scrape(); code != http.StatusOK {
				t.Errorf("scrape: %d", code)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("32 concurrent scrapes made %d reads, want 1", n)
	}
	time.Sleep(250 * time.Millisecond)
	scrape()
	if n := reads.Load(); n != 2 {
		t.Errorf("a scrape after the interval made %d reads in all, want 2", n)
	}
}

// scrapeText parses what h serves, as Prometheus does, into each series
// as "name label-values..." and its value.
func scrapeText(t *testing.T, h http.Handler, gz bool) map[string]float64 {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+IPVSStatsPath, nil)
	if !gz {
		req.Header.Set("Accept-Encoding", "identity") // else net/http asks for gzip and undoes it
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if gz != resp.Uncompressed {
		t.Errorf("asked for gzip %v, got it %v", gz, resp.Uncompressed)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			key := name
			for _, n := range []string{"service", "virtual_server", "protocol", "real_server"} {
				if v, ok := l[n]; ok {
					key += " " + v
				}
			}
			if s.Counter != nil {
				out[key] = s.GetCounter().GetValue()
			} else {
				out[key] = s.GetGauge().GetValue()
			}
		}
	}
	return out
}

// BenchmarkIPVSStatsText is the text of one /metrics/ipvs scrape of 10k
// virtual servers with 10 real servers each (750,013 series), its
// statistics already read: plain, gzipped with nothing changed since the
// last scrape, and gzipped with a quarter of the real servers' figures
// changed (as a scrape that reads 2,500 again finds them in a busy
// cluster).
func BenchmarkIPVSStatsText(b *testing.B) {
	stats, owners := statsOf(10000, 10, 1)
	h := IPVSStats{Read: func() ([]ipvs.VirtualServerStats, error) { return stats, nil }, Owners: func() map[ipvs.Key]string { return owners }, MinInterval: -1}.Handler()
	for _, c := range []struct {
		name     string
		gz       bool
		changing int
	}{{"plain", false, 0}, {"gzip-unchanged", true, 0}, {"gzip-quarter-changed", true, 2500}} {
		b.Run(c.name, func(b *testing.B) {
			var body discard
			n := 0
			for b.Loop() {
				for range c.changing {
					i := n % len(stats)
					stats[i].Reals = slices.Clone(stats[i].Reals)
					stats[i].Reals[0].PacketsIn++
					n++
				}
				req := httptest.NewRequest("GET", IPVSStatsPath, nil)
				if c.gz {
					req.Header.Set("Accept-Encoding", "gzip")
				}
				body = 0
				h.ServeHTTP(&body, req)
			}
			b.ReportMetric(float64(body)/1e6, "MB/scrape")
		})
	}
}

// discard is a ResponseWriter that counts what it is written, and keeps
// nothing.
type discard int

func (*discard) Header() http.Header           { return http.Header{} }
func (d *discard) Write(p []byte) (int, error) { *d += discard(len(p)); return len(p), nil }
func (*discard) WriteHeader(int)               {}
