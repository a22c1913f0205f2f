package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// servedNames are the metric names a scrape of /metrics and /metrics/ipvs
// can show, histograms' series included.
func servedNames(t *testing.T) map[string]bool {
	t.Helper()
	m := New()
	m.InitFamily("IPv4")
	m.RegisterRESTClient()
	m.NoLocalEndpoints.WithLabelValues("internal", "IPv4")
	m.FailedObjects.WithLabelValues("setup")
	m.IPTablesRestoreFailures.WithLabelValues("IPv4")
	m.ConntrackDeleted.WithLabelValues("IPv4")
	m.CountHealth(false, 200)
	m.CountHealth(true, 200)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		n := f.GetName()
		names[n] = true
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[n+s] = true
			}
		}
	}
	// The vectors with no series yet are not gathered: name them too.
	for _, n := range []string{"rest_client_requests_total", "rest_client_request_duration_seconds",
		"rest_client_rate_limiter_duration_seconds", "kube_ipvs_proxy_conflicting_claims"} {
		names[n] = true
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			names[n+s] = true
		}
	}
	for _, f := range ipvsFamilies {
		names["kube_ipvs_proxy_ipvs_"+f.name] = true
	}
	names["kube_ipvs_proxy_ipvs_stats_read_duration_seconds"] = true
	return names
}

// metricRefs are the metric names an expression uses: ours and
// kube-proxy's prefixes (up and the like are Prometheus' own).
var metricRefs = regexp.MustCompile(`\b(?:kubeproxy|kube_ipvs_proxy|rest_client|process|go)_[a-zA-Z0-9_]+`)

// Every query of the dashboard and every alert of deploy/monitoring names
// a metric the proxier serves: a renamed metric fails this, not a
// dashboard panel gone blank in production.
func TestMonitoringQueriesNameServedMetrics(t *testing.T) {
	served := servedNames(t)
	var exprs []string
	dash, err := os.ReadFile("../deploy/monitoring/dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Type  string
				Query any
			}
		}
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatal(err)
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			exprs = append(exprs, q.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if s, ok := v.Query.(string); ok && v.Type == "query" {
			exprs = append(exprs, s)
		}
	}
	rules, err := os.ReadFile("../deploy/monitoring/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Spec struct {
			Groups []struct {
				Rules []struct{ Alert, Expr string }
			}
		}
	}
	if err := yaml.Unmarshal(rules, &r); err != nil {
		t.Fatal(err)
	}
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			exprs = append(exprs, rule.Expr)
		}
	}
	if len(exprs) < 10 {
		t.Fatalf("only %d queries found", len(exprs))
	}
	for _, e := range exprs {
		refs := metricRefs.FindAllString(e, -1)
		if len(refs) == 0 && !strings.Contains(e, "up{") {
			t.Errorf("%q names no metric", e)
		}
		for _, n := range refs {
			if !served[n] {
				t.Errorf("%q names %s, which the proxier does not serve", e, n)
			}
		}
	}
}

// upstreamNames are kube-proxy v1.37's own metrics
// (pkg/proxy/metrics/metrics.go), all under the kubeproxy_ prefix.
var upstreamNames = []string{
	"sync_proxy_rules_duration_seconds", "sync_full_proxy_rules_duration_seconds",
	"sync_partial_proxy_rules_duration_seconds", "sync_proxy_rules_last_timestamp_seconds",
	"network_programming_duration_seconds", "sync_proxy_rules_endpoint_changes_pending",
	"sync_proxy_rules_endpoint_changes_total", "sync_proxy_rules_service_changes_pending",
	"sync_proxy_rules_service_changes_total", "sync_proxy_rules_iptables_restore_failures_total",
	"sync_proxy_rules_iptables_partial_restore_failures_total", "sync_proxy_rules_iptables_total",
	"sync_proxy_rules_iptables_last", "sync_proxy_rules_nftables_sync_failures_total",
	"sync_proxy_rules_nftables_cleanup_failures_total", "proxy_healthz_total", "proxy_livez_total",
	"sync_proxy_rules_last_queued_timestamp_seconds", "sync_proxy_rules_no_local_endpoints_total",
	"conntrack_reconciler_sync_duration_seconds", "conntrack_reconciler_deleted_entries_total",
}

// TestOwnMetricsCannotCollide: a kubeproxy_ metric we serve is one of
// kube-proxy's, with its name; each of our own is under our prefix, which
// no future kube-proxy metric can take.
func TestOwnMetricsCannotCollide(t *testing.T) {
	for n := range servedNames(t) {
		if rest, ok := strings.CutPrefix(n, "kubeproxy_"); ok {
			rest = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(rest, "_bucket"), "_sum"), "_count")
			if !slices.Contains(upstreamNames, rest) {
				t.Errorf("%s has kube-proxy's prefix but is no kube-proxy metric", n)
			}
			continue
		}
		if !strings.HasPrefix(n, "kube_ipvs_proxy_") && !strings.HasPrefix(n, "rest_client_") &&
			!strings.HasPrefix(n, "go_") && !strings.HasPrefix(n, "process_") {
			t.Errorf("%s is under no prefix of ours or of kube-proxy's libraries", n)
		}
	}
}
