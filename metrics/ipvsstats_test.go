package metrics

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

func TestIPVSStatsAreSeriesPerVirtualAndRealServer(t *testing.T) {
	key := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Port: 80, Protocol: ipvs.TCP}
	var fail error
	m := New()
	m.ExportIPVSStats(IPVSStats{
		Read: func() ([]ipvs.VirtualServerStats, error) {
			return []ipvs.VirtualServerStats{{Key: key, Counters: ipvs.Counters{Connections: 7, BytesIn: 700},
				Reals: []ipvs.RealServerStats{{ID: netip.MustParseAddrPort("10.244.0.1:8080"), ActiveConns: 2, InactiveConns: 1,
					Counters: ipvs.Counters{Connections: 7, PacketsIn: 10, PacketsOut: 9, BytesIn: 700, BytesOut: 900}}}}}, fail
		},
		Owners: func() map[ipvs.Key]string { return map[ipvs.Key]string{key: "ns/a"} },
	})
	rs := "ns/a 10.96.0.1:80 TCP 10.244.0.1:8080"
	got := gather(t, m)
	for series, want := range map[string]float64{
		"kubeproxy_ipvs_real_server_active_connections " + rs:                   2,
		"kubeproxy_ipvs_real_server_inactive_connections " + rs:                 1,
		"kubeproxy_ipvs_real_server_packets_in_total " + rs:                     10,
		"kubeproxy_ipvs_real_server_bytes_out_total " + rs:                      900,
		"kubeproxy_ipvs_virtual_server_connections_total ns/a 10.96.0.1:80 TCP": 7,
		"kubeproxy_ipvs_virtual_server_bytes_in_total ns/a 10.96.0.1:80 TCP":    700,
		"kubeproxy_ipvs_stats_read_failures_total":                              0,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}

	// A failed read leaves the series out and counts the failure; the
	// other metrics are still served.
	fail = errors.New("netlink: interrupted")
	got = gather(t, m)
	if _, ok := got["kubeproxy_ipvs_virtual_server_connections_total ns/a 10.96.0.1:80 TCP"]; ok || got["kubeproxy_ipvs_stats_read_failures_total"] != 1 {
		t.Errorf("after a failed read: %v", got)
	}
	if _, ok := got["kubeproxy_sync_proxy_rules_last_timestamp_seconds"]; !ok {
		t.Error("a failed read took the other metrics with it")
	}
}

// gather returns each series as "name label-values..." and its value.
func gather(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			key := f.GetName()
			for _, n := range []string{"service", "virtual_server", "protocol", "real_server"} {
				if v, ok := l[n]; ok {
					key += " " + v
				}
			}
			switch {
			case s.Counter != nil:
				out[key] = s.GetCounter().GetValue()
			case s.Gauge != nil:
				out[key] = s.GetGauge().GetValue()
			default:
				out[key] = 0
			}
		}
	}
	return out
}
