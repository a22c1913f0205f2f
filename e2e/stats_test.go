//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestIPVSStatsCountEachBackend: with --ipvs-stats, /metrics has the
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
	waitAnswerSet(t, client.HTTP, vip, "stats-a,stats-b", 4, 30*time.Second)
	_, before := get(t, "http://127.0.0.1:10249/metrics")
	const requests = 10
	if _, err := answers(client.HTTP, vip, requests); err != nil {
		t.Fatal(err)
	}
	_, after := get(t, "http://127.0.0.1:10249/metrics")

	service := `service="stats/web"`
	vsConns := series(after, "kubeproxy_ipvs_virtual_server_connections_total", service, `virtual_server="10.96.62.10:80"`, `protocol="TCP"`)
	vsBefore := series(before, "kubeproxy_ipvs_virtual_server_connections_total", service)
	if len(vsConns) != 1 {
		t.Fatalf("virtual server connections: %v, want one series", vsConns)
	}
	for labels, v := range vsConns {
		if got := v - vsBefore[labels]; got != requests {
			t.Errorf("virtual server %s counted %v connections, want %d", labels, got, requests)
		}
	}
	sum := 0.0
	for _, pod := range []string{"10.244.62.1:8080", "10.244.62.2:8080"} {
		rs := `real_server="` + pod + `"`
		conns := series(after, "kubeproxy_ipvs_real_server_connections_total", service, rs)
		connsBefore := series(before, "kubeproxy_ipvs_real_server_connections_total", service, rs)
		bytes := series(after, "kubeproxy_ipvs_real_server_bytes_out_total", service, rs)
		inactive := series(after, "kubeproxy_ipvs_real_server_inactive_connections", service, rs)
		if len(conns) != 1 || len(bytes) != 1 || len(inactive) != 1 {
			t.Fatalf("%s: connections %v, bytes out %v, inactive %v; want a series each", pod, conns, bytes, inactive)
		}
		for labels, v := range conns {
			got := v - connsBefore[labels]
			sum += got
			if got < requests/2-1 || bytes[labels] == 0 {
				t.Errorf("%s: %v new connections, %v bytes out; round robin gives each about half of %d", pod, got, bytes[labels], requests)
			}
		}
	}
	if sum != requests {
		t.Errorf("the real servers counted %v connections, want %d", sum, requests)
	}
}
