package metrics

import (
	"encoding/json"
	"os"
	"regexp"
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
		"rest_client_rate_limiter_duration_seconds", "kubeproxy_sync_proxy_rules_conflicting_claims"} {
		names[n] = true
		for _, s := range []string{"_bucket", "_sum", "_count"} {
			names[n+s] = true
		}
	}
	for _, f := range ipvsFamilies {
		names["kubeproxy_ipvs_"+f.name] = true
	}
	names["kubeproxy_ipvs_stats_read_duration_seconds"] = true
	return names
}

// metricRefs are the metric names an expression uses: ours and
// kube-proxy's prefixes (up and the like are Prometheus' own).
var metricRefs = regexp.MustCompile(`\b(?:kubeproxy|rest_client|process|go)_[a-zA-Z0-9_]+`)

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
