// Package metrics defines the proxier's Prometheus metrics under kube-proxy's
// names (dashboards and alerts written for kube-proxy keep working) and
// serves them with /proxyMode on the metrics address. Metrics kube-proxy
// does not have are named under our own prefix (ours), so that no future
// kubeproxy_ name can collide with them.
package metrics

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one registry with every metric the proxier reports.
// Those labelled ip_family ("IPv4", "IPv6") are upstream's: it runs a
// proxier per family, ours syncs both families at once and reports each
// (see InitFamily).
type Metrics struct {
	Registry *prometheus.Registry

	SyncDuration               *prometheus.HistogramVec
	FullSyncDuration           *prometheus.HistogramVec
	PartialSyncDuration        *prometheus.HistogramVec
	NetworkProgrammingDuration *prometheus.HistogramVec
	LastSyncTimestamp          *prometheus.GaugeVec
	LastQueuedTimestamp        *prometheus.GaugeVec
	ServiceChangesPending      prometheus.Gauge
	EndpointChangesPending     prometheus.Gauge
	ServiceChangesTotal        prometheus.Counter
	EndpointChangesTotal       prometheus.Counter
	SyncFailuresTotal          prometheus.Counter
	IPTablesRestoreFailures    *prometheus.CounterVec
	KernelOpsTotal             prometheus.Counter
	FailedObjects              *prometheus.GaugeVec
	NoLocalEndpoints           *prometheus.GaugeVec
	ConntrackDeleted           *prometheus.CounterVec
	ConflictingClaims          prometheus.Gauge
	// HealthzTotal and LivezTotal count the answers of /healthz and
	// /livez by HTTP status, as kube-proxy's do.
	HealthzTotal, LivezTotal *prometheus.CounterVec
}

// ours prefixes the metrics that are this proxier's own.
const ours = "kube_ipvs_proxy"

// byFamily is upstream's label of the IP family a series is of.
var byFamily = []string{"ip_family"}

func New() *Metrics {
	// Buckets as kube-proxy's, so existing dashboards read the same.
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	npBuckets := slices.Concat(prometheus.LinearBuckets(0.25, 0.25, 2), prometheus.LinearBuckets(1, 1, 59),
		prometheus.LinearBuckets(60, 5, 12), prometheus.LinearBuckets(120, 30, 7))
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		SyncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds", Buckets: syncBuckets}, byFamily),
		FullSyncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "kubeproxy",
			Name: "sync_full_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: syncBuckets}, byFamily),
		PartialSyncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "kubeproxy",
			Name: "sync_partial_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: syncBuckets}, byFamily),
		NetworkProgrammingDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "kubeproxy",
			Name: "network_programming_duration_seconds", Help: "In Cluster Network Programming Latency in seconds", Buckets: npBuckets}, byFamily),
		LastSyncTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_last_timestamp_seconds", Help: "The last time proxy rules were successfully synced"}, byFamily),
		LastQueuedTimestamp: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_last_queued_timestamp_seconds", Help: "The last time a sync of proxy rules was queued"}, byFamily),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_service_changes_pending", Help: "Pending proxy rules Service changes"}),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_endpoint_changes_pending", Help: "Pending proxy rules Endpoint changes"}),
		ServiceChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_service_changes_total", Help: "Cumulative proxy rules Service changes"}),
		EndpointChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_endpoint_changes_total", Help: "Cumulative proxy rules Endpoint changes"}),
		SyncFailuresTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ours,
			Name: "sync_failures_total", Help: "Syncs that left some kernel object unapplied (retried)"}),
		IPTablesRestoreFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_iptables_restore_failures_total", Help: "Cumulative proxy iptables restore failures"}, byFamily),
		KernelOpsTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ours,
			Name: "kernel_operations_total", Help: "Kernel objects added, updated or deleted by syncs"}),
		FailedObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ours,
			Name: "failed_objects", Help: "Kernel objects whose last write failed, retried alone with backoff, by kind"}, []string{"kind"}),
		NoLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_no_local_endpoints_total",
			Help: "Services whose Local traffic policy drops traffic: they have endpoints, none on this node"}, []string{"traffic_policy", "ip_family"}),
	}
	m.ConntrackDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubeproxy",
		Name: "conntrack_reconciler_deleted_entries_total", Help: "Conntrack entries of stale UDP flows deleted"}, byFamily)
	m.ConflictingClaims = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ours,
		Name: "conflicting_claims", Help: "Virtual servers a Service wants but another Service's stronger or older claim holds"})
	m.HealthzTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubeproxy",
		Name: "proxy_healthz_total", Help: "Cumulative proxy healthz HTTP status"}, []string{"code"})
	m.LivezTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubeproxy",
		Name: "proxy_livez_total", Help: "Cumulative proxy livez HTTP status"}, []string{"code"})
	m.Registry.MustRegister(m.HealthzTotal, m.LivezTotal)
	m.Registry.MustRegister(m.SyncDuration, m.FullSyncDuration, m.PartialSyncDuration, m.NetworkProgrammingDuration,
		m.LastSyncTimestamp, m.LastQueuedTimestamp, m.ServiceChangesPending, m.EndpointChangesPending,
		m.ServiceChangesTotal, m.EndpointChangesTotal, m.SyncFailuresTotal, m.IPTablesRestoreFailures, m.KernelOpsTotal, m.FailedObjects,
		m.NoLocalEndpoints, m.ConntrackDeleted, m.ConflictingClaims, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// InitFamily creates the series of an IP family the proxier runs, at zero,
// so that they are scraped before their first event as unlabelled ones
// are: a proxier whose first sync never ends shows a last sync at 0.
func (m *Metrics) InitFamily(fam string) {
	for _, h := range []*prometheus.HistogramVec{m.SyncDuration, m.FullSyncDuration, m.PartialSyncDuration, m.NetworkProgrammingDuration} {
		h.WithLabelValues(fam)
	}
	m.LastSyncTimestamp.WithLabelValues(fam)
	m.LastQueuedTimestamp.WithLabelValues(fam)
	m.IPTablesRestoreFailures.WithLabelValues(fam)
	m.ConntrackDeleted.WithLabelValues(fam)
}

// CountHealth counts one answer of /livez (livez) or /healthz by status.
func (m *Metrics) CountHealth(livez bool, code int) {
	c := m.HealthzTotal
	if livez {
		c = m.LivezTotal
	}
	c.WithLabelValues(strconv.Itoa(code)).Inc()
}

// ObserveSync records one sync's duration for an IP family under the total
// and the full or partial histogram.
func (m *Metrics) ObserveSync(fam string, d time.Duration, full bool) {
	m.SyncDuration.WithLabelValues(fam).Observe(d.Seconds())
	if full {
		m.FullSyncDuration.WithLabelValues(fam).Observe(d.Seconds())
	} else {
		m.PartialSyncDuration.WithLabelValues(fam).Observe(d.Seconds())
	}
}

// Handler serves /metrics and /proxyMode; extra adds paths such as /healthz.
func (m *Metrics) Handler(extra map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ipvs"))
	})
	for path, h := range extra {
		mux.Handle(path, h)
	}
	return mux
}
