package metrics

import (
	"bufio"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// IPVSStats is what --ipvs-stats serves on /metrics/ipvs: the kernel's
// statistics of each virtual server and real server, read at each scrape.
// That is seven series per real server, so they are opt-in and on a path of
// their own, which a scraper can ask for less often than /metrics. They are
// written as Prometheus text directly: for 750k series (100k real servers)
// the client library's metric objects cost six times this whole scrape.
type IPVSStats struct {
	// Read lists every virtual server with its real servers' statistics.
	Read func() ([]ipvs.VirtualServerStats, error)
	// Owners names the Service that wants each virtual server.
	Owners func() map[ipvs.Key]string
	// MinInterval is how long a read is served again instead of reading
	// anew (zero means DefaultStatsInterval, negative reads every time).
	MinInterval time.Duration
}

// IPVSStatsPath is where the statistics are served.
const IPVSStatsPath = "/metrics/ipvs"

// DefaultStatsInterval: a full read costs seconds of CPU at 10k Services
// (docs/performance.md), and scrapers that ask at once (a Prometheus HA
// pair, a curl beside one) share one read.
const DefaultStatsInterval = 5 * time.Second

// statsRead is one read of the statistics, kept for the scrapes that come
// within MinInterval of it.
type statsRead struct {
	mu    sync.Mutex
	ok    bool // stats hold a read
	at    time.Time
	stats []ipvs.VirtualServerStats
	took  time.Duration
}

// get returns a read no older than interval: one scrape at a time reads,
// and those waiting for it are then served what it read.
func (c *statsRead) get(read func() ([]ipvs.VirtualServerStats, error), interval time.Duration) ([]ipvs.VirtualServerStats, time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if interval >= 0 && c.ok && time.Since(c.at) < interval {
		return c.stats, c.took, nil
	}
	start := time.Now()
	stats, err := read()
	if err != nil {
		c.ok, c.stats = false, nil
		return nil, 0, err
	}
	c.ok, c.at, c.stats, c.took = true, time.Now(), stats, time.Since(start)
	return stats, c.took, nil
}

// Handler serves the statistics in the Prometheus text format, gzipped
// when the scraper accepts it. A failed read answers 503, so that the
// scrape shows as failed rather than as series that stopped.
func (s IPVSStats) Handler() http.Handler {
	interval := s.MinInterval
	if interval == 0 {
		interval = DefaultStatsInterval
	}
	cache := &statsRead{}
	gz := newGzipText()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stats, read, err := cache.get(s.Read, interval)
		if err != nil {
			http.Error(w, "read the IPVS statistics: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			out := bufio.NewWriterSize(w, 64<<10)
			defer out.Flush()
			_ = gz.write(out, stats, s.Owners(), read) // a failed write is the client gone
			return
		}
		out := bufio.NewWriterSize(w, 64<<10)
		defer out.Flush()
		writeIPVSStats(out, stats, s.Owners(), read)
	})
}

// family is one metric: its name, help, type, and its value of a virtual
// server (vs) or of a real server (rs), whichever it has.
type family struct {
	name, help, typ string
	vs              func(*ipvs.VirtualServerStats) uint64
	rs              func(*ipvs.RealServerStats) uint64
}

var ipvsFamilies = []family{
	{name: "virtual_server_connections_total", help: "Connections IPVS scheduled through the virtual server", typ: "counter",
		vs: func(s *ipvs.VirtualServerStats) uint64 { return s.Connections }},
	{name: "virtual_server_packets_in_total", help: "Packets from clients through the virtual server", typ: "counter",
		vs: func(s *ipvs.VirtualServerStats) uint64 { return s.PacketsIn }},
	{name: "virtual_server_packets_out_total", help: "Packets to clients through the virtual server", typ: "counter",
		vs: func(s *ipvs.VirtualServerStats) uint64 { return s.PacketsOut }},
	{name: "virtual_server_bytes_in_total", help: "Bytes from clients through the virtual server", typ: "counter",
		vs: func(s *ipvs.VirtualServerStats) uint64 { return s.BytesIn }},
	{name: "virtual_server_bytes_out_total", help: "Bytes to clients through the virtual server", typ: "counter",
		vs: func(s *ipvs.VirtualServerStats) uint64 { return s.BytesOut }},
	{name: "real_server_active_connections", help: "Established connections IPVS holds to the real server", typ: "gauge",
		rs: func(s *ipvs.RealServerStats) uint64 { return uint64(max(s.ActiveConns, 0)) }},
	{name: "real_server_inactive_connections", help: "Other connections IPVS holds to the real server (closing, UDP)", typ: "gauge",
		rs: func(s *ipvs.RealServerStats) uint64 { return uint64(max(s.InactiveConns, 0)) }},
	{name: "real_server_connections_total", help: "Connections IPVS sent to the real server", typ: "counter",
		rs: func(s *ipvs.RealServerStats) uint64 { return s.Connections }},
	{name: "real_server_packets_in_total", help: "Packets from clients to the real server", typ: "counter",
		rs: func(s *ipvs.RealServerStats) uint64 { return s.PacketsIn }},
	{name: "real_server_packets_out_total", help: "Packets from the real server to clients", typ: "counter",
		rs: func(s *ipvs.RealServerStats) uint64 { return s.PacketsOut }},
	{name: "real_server_bytes_in_total", help: "Bytes from clients to the real server", typ: "counter",
		rs: func(s *ipvs.RealServerStats) uint64 { return s.BytesIn }},
	{name: "real_server_bytes_out_total", help: "Bytes from the real server to clients", typ: "counter",
		rs: func(s *ipvs.RealServerStats) uint64 { return s.BytesOut }},
}

// writeIPVSStats writes every family, its series together as the format
// wants, each labelled with the Service, the virtual server
// (address:port), the protocol and, for a real server, its address:port.
func writeIPVSStats(w *bufio.Writer, stats []ipvs.VirtualServerStats, owners map[ipvs.Key]string, read time.Duration) {
	labels := labelsOf(stats, owners)
	var b []byte
	for fi := range ipvsFamilies {
		f := &ipvsFamilies[fi]
		b = f.appendHeader(b[:0])
		if f.vs != nil {
			b = f.appendVirtualServers(b, stats, labels)
			_, _ = w.Write(b)
			continue
		}
		_, _ = w.Write(b)
		for i := range stats {
			b = f.appendRealServers(b[:0], stats[i:i+1], labels[i:i+1])
			_, _ = w.Write(b)
		}
	}
	_, _ = w.Write(appendReadDuration(b[:0], read))
}

// labelsOf is each virtual server's labels, without the closing brace:
// its Service, its address:port and its protocol.
func labelsOf(stats []ipvs.VirtualServerStats, owners map[ipvs.Key]string) [][]byte {
	labels := make([][]byte, len(stats))
	for i := range stats {
		s := &stats[i]
		var b []byte
		b = append(b, `{service="`...)
		b = appendEscaped(b, owners[s.Key])
		b = append(b, `",virtual_server="`...)
		b = netip.AddrPortFrom(s.Address, s.Port).AppendTo(b)
		b = append(b, `",protocol="`...)
		b = append(b, s.Protocol...)
		labels[i] = append(b, '"')
	}
	return labels
}

// metricName is the family's full name.
func (f *family) metricName() string { return "kube_ipvs_proxy_ipvs_" + f.name }

// appendHeader appends the family's HELP and TYPE lines.
func (f *family) appendHeader(b []byte) []byte {
	name := f.metricName()
	return append(b, "# HELP "+name+" "+f.help+"\n# TYPE "+name+" "+f.typ+"\n"...)
}

// appendVirtualServers appends a virtual-server family's line of each of
// stats, labels[i] being stats[i]'s.
func (f *family) appendVirtualServers(b []byte, stats []ipvs.VirtualServerStats, labels [][]byte) []byte {
	name := f.metricName()
	for i := range stats {
		b = append(append(append(b, name...), labels[i]...), "} "...)
		b = strconv.AppendUint(b, f.vs(&stats[i]), 10)
		b = append(b, '\n')
	}
	return b
}

// appendRealServers appends a real-server family's line of each real
// server of stats, labels[i] being stats[i]'s.
func (f *family) appendRealServers(b []byte, stats []ipvs.VirtualServerStats, labels [][]byte) []byte {
	name := f.metricName()
	for i := range stats {
		for j := range stats[i].Reals {
			rs := &stats[i].Reals[j]
			b = append(append(append(b, name...), labels[i]...), `,real_server="`...)
			b = rs.ID.AppendTo(b)
			b = append(b, `"} `...)
			b = strconv.AppendUint(b, f.rs(rs), 10)
			b = append(b, '\n')
		}
	}
	return b
}

// appendReadDuration appends the read-duration gauge, the last family.
func appendReadDuration(b []byte, read time.Duration) []byte {
	b = append(b, "# HELP kube_ipvs_proxy_ipvs_stats_read_duration_seconds How long this scrape's read of the IPVS statistics took\n"+
		"# TYPE kube_ipvs_proxy_ipvs_stats_read_duration_seconds gauge\nkube_ipvs_proxy_ipvs_stats_read_duration_seconds "...)
	b = strconv.AppendFloat(b, read.Seconds(), 'g', -1, 64)
	return append(b, '\n')
}

// appendEscaped appends a label value as the text format escapes it.
func appendEscaped(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\', '"':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return b
}
