//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// series returns the value of each series of /metrics whose line holds
// every one of parts, by its labels.
func series(metrics, name string, parts ...string) map[string]float64 {
	out := map[string]float64{}
	for _, l := range strings.Split(metrics, "\n") {
		labels, value, ok := strings.Cut(strings.TrimPrefix(l, name), " ")
		if !ok || !strings.HasPrefix(l, name+"{") {
			continue
		}
		match := true
		for _, p := range parts {
			match = match && strings.Contains(labels, p)
		}
		if v, err := strconv.ParseFloat(value, 64); match && err == nil {
			out[labels] = v
		}
	}
	return out
}

func sum(m map[string]float64) float64 {
	total := 0.0
	for _, v := range m {
		total += v
	}
	return total
}

// TestIPVSStatsCountEachBackend: with --ipvs-stats, /metrics/ipvs has the
// kernel's counters of each virtual and real server, labelled with the
// Service: connections made through a Service count at the backends that
// answered them, and at the virtual server.
func TestIPVSStatsCountEachBackend(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "stats"
	mustNamespace(t, ns)
	a := mustPod(t, "stats-a", "10.244.62.1", true)
	b := mustPod(t, "stats-b", "10.244.62.2", true)
	client := mustPod(t, "stats-client", "10.244.62.100", false)
	svc, slice := webService(ns, "10.96.62.10", a, b)
	mustApply(t, svc, slice)
	vip := ap("10.96.62.10:80")
	service := `service="stats/web"`
	reals := []string{`real_server="10.244.62.1:8080"`, `real_server="10.244.62.2:8080"`}
	// Programmed, and no connection yet: the kernel's counters of this
	// Service start at 0.
	eventually(t, "both real servers exported", 30*time.Second, func() error {
		_, m := get(t, "http://127.0.0.1:10249/metrics/ipvs")
		for _, rs := range reals {
			if len(series(m, "kube_ipvs_proxy_ipvs_real_server_connections_total", service, rs)) != 1 {
				return fmt.Errorf("no series of %s", rs)
			}
		}
		return nil
	})
	const requests = 10
	if _, err := answers(client.HTTP, vip, requests); err != nil {
		t.Fatal(err)
	}
	// The kernel sums its per-CPU counters every 2 seconds, and a read is
	// served again for up to 5 s.
	eventually(t, "connections counted", 20*time.Second, func() error {
		_, m := get(t, "http://127.0.0.1:10249/metrics/ipvs")
		vs := series(m, "kube_ipvs_proxy_ipvs_virtual_server_connections_total", service, `virtual_server="10.96.62.10:80"`, `protocol="TCP"`)
		if sum(vs) != requests || len(vs) != 1 {
			return fmt.Errorf("virtual server connections %v, want one series of %d", vs, requests)
		}
		total := 0.0
		for _, rs := range reals {
			conns := sum(series(m, "kube_ipvs_proxy_ipvs_real_server_connections_total", service, rs))
			bytes := sum(series(m, "kube_ipvs_proxy_ipvs_real_server_bytes_out_total", service, rs))
			if conns < requests/2-1 || bytes == 0 || len(series(m, "kube_ipvs_proxy_ipvs_real_server_inactive_connections", service, rs)) != 1 {
				return fmt.Errorf("%s: %v connections, %v bytes out; round robin gives each about half of %d", rs, conns, bytes, requests)
			}
			total += conns
		}
		if total != requests {
			return fmt.Errorf("the real servers counted %v connections, want %d", total, requests)
		}
		return nil
	})
	// The drift check's real-server dumps hand on the same counters
	// (ipvs.Netlink.TapRealServerStats), which a scrape then serves.
	nl, err := ipvs.NewNetlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	k := ipvs.Key{Address: vip.Addr(), Protocol: ipvs.TCP, Port: 80}
	var tapped []ipvs.RealServerStats
	nl.TapRealServerStats(func(got ipvs.Key, reals []ipvs.RealServerStats) {
		if got == k {
			tapped = reals
		}
	})
	byID := func(a, b ipvs.RealServerStats) int { return a.ID.Compare(b.ID) }
	eventually(t, "a drift-check read's statistics equal the statistics dump's", 10*time.Second, func() error {
		if _, err := nl.RealServers(k); err != nil {
			return err
		}
		direct, err := nl.RealServerStats(k)
		if err != nil {
			return err
		}
		slices.SortFunc(tapped, byID)
		slices.SortFunc(direct, byID)
		var conns uint64
		for _, rs := range tapped {
			conns += rs.Connections
		}
		if !slices.Equal(tapped, direct) || conns != requests {
			return fmt.Errorf("tapped %+v (%d connections), dumped for statistics %+v; want equal, with %d connections", tapped, conns, direct, requests)
		}
		return nil
	})
}
