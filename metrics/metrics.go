// Package metrics defines the proxier's Prometheus metrics under kube-proxy's
// names (dashboards and alerts written for kube-proxy keep working) and
// serves them with /proxyMode on the metrics address.
package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is one registry with every metric the proxier reports.
type Metrics struct {
	Registry *prometheus.Registry

	SyncDuration               prometheus.Histogram
	FullSyncDuration           prometheus.Histogram
	PartialSyncDuration        prometheus.Histogram
	NetworkProgrammingDuration prometheus.Histogram
	LastSyncTimestamp          prometheus.Gauge
	LastQueuedTimestamp        prometheus.Gauge
	ServiceChangesPending      prometheus.Gauge
	EndpointChangesPending     prometheus.Gauge
	ServiceChangesTotal        prometheus.Counter
	EndpointChangesTotal       prometheus.Counter
	SyncFailuresTotal          prometheus.Counter
	IPTablesRestoreFailures    prometheus.Counter
	KernelOpsTotal             prometheus.Counter
	FailedObjects              *prometheus.GaugeVec
	NoLocalEndpoints           *prometheus.GaugeVec
	ConntrackDeleted           *prometheus.CounterVec
	ConflictingClaims          prometheus.Gauge
}

func New() *Metrics {
	// Buckets as kube-proxy's, so existing dashboards read the same.
	syncBuckets := prometheus.ExponentialBuckets(0.001, 2, 15)
	npBuckets := append(append(prometheus.LinearBuckets(0.25, 0.25, 2), prometheus.LinearBuckets(1, 1, 59)...),
		append(prometheus.LinearBuckets(75, 15, 3), prometheus.LinearBuckets(120, 60, 7)...)...)
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		SyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds", Buckets: syncBuckets}),
		FullSyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kubeproxy",
			Name: "sync_full_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for full resyncs", Buckets: syncBuckets}),
		PartialSyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kubeproxy",
			Name: "sync_partial_proxy_rules_duration_seconds", Help: "SyncProxyRules latency in seconds for partial resyncs", Buckets: syncBuckets}),
		NetworkProgrammingDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "kubeproxy",
			Name: "network_programming_duration_seconds", Help: "In Cluster Network Programming Latency in seconds", Buckets: npBuckets}),
		LastSyncTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_last_timestamp_seconds", Help: "The last time proxy rules were successfully synced"}),
		LastQueuedTimestamp: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_last_queued_timestamp_seconds", Help: "The last time a sync of proxy rules was queued"}),
		ServiceChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_service_changes_pending", Help: "Pending proxy rules Service changes"}),
		EndpointChangesPending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_endpoint_changes_pending", Help: "Pending proxy rules Endpoint changes"}),
		ServiceChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_service_changes_total", Help: "Cumulative proxy rules Service changes"}),
		EndpointChangesTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_endpoint_changes_total", Help: "Cumulative proxy rules Endpoint changes"}),
		SyncFailuresTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_failures_total", Help: "Syncs that left some kernel object unapplied (retried)"}),
		IPTablesRestoreFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_iptables_restore_failures_total", Help: "Cumulative proxy iptables restore failures"}),
		KernelOpsTotal: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_kernel_operations_total", Help: "Kernel objects added, updated or deleted by syncs"}),
		FailedObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_failed_objects", Help: "Kernel objects whose last write failed, retried alone with backoff, by kind"}, []string{"kind"}),
		NoLocalEndpoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "kubeproxy",
			Name: "sync_proxy_rules_no_local_endpoints_total",
			Help: "Services whose Local traffic policy drops traffic: they have endpoints, none on this node"}, []string{"traffic_policy"}),
	}
	// Upstream's name and label ("IPv4", "IPv6").
	m.ConntrackDeleted = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kubeproxy",
		Name: "reconcile_conntrack_flows_deleted_entries_total", Help: "Conntrack entries of stale UDP flows deleted"}, []string{"ip_family"})
	m.ConflictingClaims = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "kubeproxy",
		Name: "sync_proxy_rules_conflicting_claims", Help: "Virtual servers a Service wants but another Service's stronger or older claim holds"})
	m.Registry.MustRegister(m.SyncDuration, m.FullSyncDuration, m.PartialSyncDuration, m.NetworkProgrammingDuration,
		m.LastSyncTimestamp, m.LastQueuedTimestamp, m.ServiceChangesPending, m.EndpointChangesPending,
		m.ServiceChangesTotal, m.EndpointChangesTotal, m.SyncFailuresTotal, m.IPTablesRestoreFailures, m.KernelOpsTotal, m.FailedObjects,
		m.NoLocalEndpoints, m.ConntrackDeleted, m.ConflictingClaims, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// ObserveSync records one sync's duration under the total and the full or partial histogram.
func (m *Metrics) ObserveSync(d time.Duration, full bool) {
	m.SyncDuration.Observe(d.Seconds())
	if full {
		m.FullSyncDuration.Observe(d.Seconds())
	} else {
		m.PartialSyncDuration.Observe(d.Seconds())
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
