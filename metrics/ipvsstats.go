package metrics

import (
	"net/netip"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// IPVSStats is what --ipvs-stats exports: the kernel's statistics of each
// virtual server and real server, read at each scrape. Their cardinality is
// one series per real server and counter, so they are opt-in.
type IPVSStats struct {
	// Read lists every virtual server with its real servers' statistics.
	Read func() ([]ipvs.VirtualServerStats, error)
	// Owners names the Service that wants each virtual server.
	Owners func() map[ipvs.Key]string
}

// ExportIPVSStats registers the statistics' collector.
func (m *Metrics) ExportIPVSStats(s IPVSStats) {
	m.Registry.MustRegister(newIPVSCollector(s))
}

type ipvsCollector struct {
	src                       IPVSStats
	vs                        counterDescs
	rs                        counterDescs
	active, inactive, readDur *prometheus.Desc
	failures                  prometheus.Counter
}

// counterDescs are the five counters of a virtual or real server.
type counterDescs struct{ conns, pktsIn, pktsOut, bytesIn, bytesOut *prometheus.Desc }

func newCounterDescs(of string, labels []string) counterDescs {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("kubeproxy_ipvs_"+of+"_"+name, help, labels, nil)
	}
	return counterDescs{
		conns:    d("connections_total", "Connections IPVS scheduled to the "+of),
		pktsIn:   d("packets_in_total", "Packets from clients through the "+of),
		pktsOut:  d("packets_out_total", "Packets to clients through the "+of),
		bytesIn:  d("bytes_in_total", "Bytes from clients through the "+of),
		bytesOut: d("bytes_out_total", "Bytes to clients through the "+of),
	}
}

func newIPVSCollector(s IPVSStats) *ipvsCollector {
	vsLabels := []string{"service", "virtual_server", "protocol"}
	rsLabels := append(vsLabels, "real_server")
	return &ipvsCollector{src: s,
		vs: newCounterDescs("virtual_server", vsLabels),
		rs: newCounterDescs("real_server", rsLabels),
		active: prometheus.NewDesc("kubeproxy_ipvs_real_server_active_connections",
			"Established connections IPVS holds to the real server", rsLabels, nil),
		inactive: prometheus.NewDesc("kubeproxy_ipvs_real_server_inactive_connections",
			"Other connections IPVS holds to the real server (closing, UDP)", rsLabels, nil),
		readDur: prometheus.NewDesc("kubeproxy_ipvs_stats_read_duration_seconds",
			"How long this scrape's read of the IPVS statistics took", nil, nil),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "kubeproxy_ipvs_stats_read_failures_total",
			Help: "Scrapes whose read of the IPVS statistics failed (their series are left out)"}),
	}
}

func (c *ipvsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []counterDescs{c.vs, c.rs} {
		ch <- d.conns
		ch <- d.pktsIn
		ch <- d.pktsOut
		ch <- d.bytesIn
		ch <- d.bytesOut
	}
	ch <- c.active
	ch <- c.inactive
	ch <- c.readDur
	c.failures.Describe(ch)
}

func (c *ipvsCollector) Collect(ch chan<- prometheus.Metric) {
	start := time.Now()
	stats, err := c.src.Read()
	if err != nil {
		c.failures.Inc()
		c.failures.Collect(ch)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.readDur, prometheus.GaugeValue, time.Since(start).Seconds())
	c.failures.Collect(ch)
	owners := c.src.Owners()
	for _, vs := range stats {
		labels := []string{owners[vs.Key], netip.AddrPortFrom(vs.Address, vs.Port).String(), string(vs.Protocol)}
		counters(ch, c.vs, vs.Counters, labels)
		for _, rs := range vs.Reals {
			rl := append(labels[:3:3], rs.ID.String())
			counters(ch, c.rs, rs.Counters, rl)
			ch <- prometheus.MustNewConstMetric(c.active, prometheus.GaugeValue, float64(rs.ActiveConns), rl...)
			ch <- prometheus.MustNewConstMetric(c.inactive, prometheus.GaugeValue, float64(rs.InactiveConns), rl...)
		}
	}
}

func counters(ch chan<- prometheus.Metric, d counterDescs, c ipvs.Counters, labels []string) {
	for _, m := range []struct {
		desc *prometheus.Desc
		v    uint64
	}{{d.conns, c.Connections}, {d.pktsIn, c.PacketsIn}, {d.pktsOut, c.PacketsOut}, {d.bytesIn, c.BytesIn}, {d.bytesOut, c.BytesOut}} {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(m.v), labels...)
	}
}
