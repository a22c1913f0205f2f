package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// TestUpstreamNamesAndLabels: the metrics kube-proxy v1.37 has carry its
// names and labels (pkg/proxy/metrics, and component-base's rest_client_*
// families of client-go's requests), so that its dashboards and alerts
// work unchanged.
func TestUpstreamNamesAndLabels(t *testing.T) {
	upstream := map[string][]string{
		"kubeproxy_sync_proxy_rules_duration_seconds":                {"ip_family"},
		"kubeproxy_sync_full_proxy_rules_duration_seconds":           {"ip_family"},
		"kubeproxy_sync_partial_proxy_rules_duration_seconds":        {"ip_family"},
		"kubeproxy_sync_proxy_rules_last_timestamp_seconds":          {"ip_family"},
		"kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds":   {"ip_family"},
		"kubeproxy_network_programming_duration_seconds":             {"ip_family"},
		"kubeproxy_sync_proxy_rules_iptables_restore_failures_total": {"ip_family"},
		"kubeproxy_sync_proxy_rules_no_local_endpoints_total":        {"ip_family", "traffic_policy"},
		"kubeproxy_conntrack_reconciler_deleted_entries_total":       {"ip_family"},
		"kubeproxy_sync_proxy_rules_service_changes_pending":         nil,
		"kubeproxy_sync_proxy_rules_endpoint_changes_pending":        nil,
		"kubeproxy_sync_proxy_rules_service_changes_total":           nil,
		"kubeproxy_sync_proxy_rules_endpoint_changes_total":          nil,
		"kubeproxy_proxy_healthz_total":                              {"code"},
		"kubeproxy_proxy_livez_total":                                {"code"},
		"rest_client_requests_total":                                 {"code", "host", "method"},
		"rest_client_request_duration_seconds":                       {"host", "verb"},
		"rest_client_rate_limiter_duration_seconds":                  {"host", "verb"},
		"rest_client_request_size_bytes":                             {"host", "verb"},
		"rest_client_response_size_bytes":                            {"host", "verb"},
	}
	m := New()
	m.InitFamily("IPv4")
	m.NoLocalEndpoints.WithLabelValues("internal", "IPv4").Set(0)
	m.CountHealth(false, 200)
	m.CountHealth(true, 503)
	// A real client-go request to a server here: its families appear as
	// kube-proxy's do.
	m.RegisterRESTClient()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }))
	defer srv.Close()
	rc, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		GroupVersion: &schema.GroupVersion{Version: "v1"}, NegotiatedSerializer: scheme.Codecs.WithoutConversion()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Get().AbsPath("/version").Do(context.Background()).Error(); err != nil {
		t.Fatal(err)
	}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		want, ok := upstream[f.GetName()]
		if !ok {
			continue
		}
		found[f.GetName()] = true
		var got []string
		for _, l := range f.GetMetric()[0].GetLabel() {
			got = append(got, l.GetName())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s has labels %v, upstream %v", f.GetName(), got, want)
		}
	}
	for name := range upstream {
		if !found[name] {
			t.Errorf("no %s", name)
		}
	}
}

// TestNetworkProgrammingBucketsAreUpstreams: a dashboard's le bounds match
// kube-proxy's, past the first minute too.
func TestNetworkProgrammingBucketsAreUpstreams(t *testing.T) {
	want := []float64{0.25, 0.5}
	for s := 1; s <= 59; s++ {
		want = append(want, float64(s))
	}
	for s := 60; s <= 115; s += 5 {
		want = append(want, float64(s))
	}
	for s := 120; s <= 300; s += 30 {
		want = append(want, float64(s))
	}
	m := New()
	m.InitFamily("IPv4")
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kubeproxy_network_programming_duration_seconds" {
			continue
		}
		var got []float64
		for _, b := range f.GetMetric()[0].GetHistogram().GetBucket() {
			got = append(got, b.GetUpperBound())
		}
		if !slices.Equal(got, want) {
			t.Errorf("buckets %v, upstream's %v", got, want)
		}
		return
	}
	t.Fatal("no kubeproxy_network_programming_duration_seconds")
}
