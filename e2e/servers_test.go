//go:build e2e

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHealthAndMetrics: kube-proxy's health and metrics endpoints answer as kube-proxy's do.
func TestHealthAndMetrics(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	for _, path := range []string{"/healthz", "/livez"} {
		code, body := get(t, "http://127.0.0.1:10256"+path)
		var rep struct {
			LastUpdated time.Time `json:"lastUpdated"`
			CurrentTime time.Time `json:"currentTime"`
		}
		if err := json.Unmarshal([]byte(body), &rep); err != nil {
			t.Fatalf("%s: %v in %q", path, err, body)
		}
		if code != 200 || rep.LastUpdated.IsZero() || rep.CurrentTime.Before(rep.LastUpdated) {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	if code, body := get(t, "http://127.0.0.1:10249/proxyMode"); code != 200 || body != "ipvs" {
		t.Errorf("/proxyMode: %d %q, want 200 ipvs", code, body)
	}
	_, metrics := get(t, "http://127.0.0.1:10249/metrics")
	// With upstream's ip_family label: IPv4 is every node's.
	for _, name := range []string{
		`kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",`,
		`kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",`,
		`kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}`,
		`kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds{ip_family="IPv4"}`,
		`kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family="IPv4"}`,
		`kubeproxy_sync_partial_proxy_rules_duration_seconds_count{ip_family="IPv4"}`,
		`kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4"}`,
	} {
		if !strings.Contains(metrics, "\n"+name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// TestLeastPrivilege: the proxier runs as system:kube-proxy (bootstrap role
// system:node-proxier) and needs nothing more: it lists and watches, and its
// start-up event reaches the apiserver.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	p := ourProxier(t)
	eventually(t, "start-up event posted", 20*time.Second, func() error {
		ctx, cancel := framework.Ctx()
		defer cancel()
		list, err := env.Admin.EventsV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "Node" && e.Regarding.Name == framework.NodeName && e.Reason == "Starting" {
				return nil
			}
		}
		return os.ErrNotExist
	})
	log, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(string(log)), "forbidden") {
		t.Errorf("proxier log mentions a forbidden request; see %s", p.LogPath)
	}
}
