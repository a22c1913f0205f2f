package metrics

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// client-go's request metrics under the names, labels and buckets
// kube-proxy serves them (k8s.io/component-base's rest_client_* families),
// so that the dashboards that chart kube-proxy's apiserver traffic chart
// ours.
var (
	latencyBuckets = []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}
	sizeBuckets    = []float64{64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216}
	restClientOnce sync.Once
)

// restClient's collectors are the process's: client-go reports to one set
// of adapters, registered once; each Metrics serves them.
var restClient = struct {
	latency, rateLimiter, requestSize, responseSize *prometheus.HistogramVec
	results, retries                                *prometheus.CounterVec
}{
	latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_request_duration_seconds",
		Help: "Request latency in seconds. Broken down by verb, and host.", Buckets: latencyBuckets}, []string{"verb", "host"}),
	rateLimiter: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_rate_limiter_duration_seconds",
		Help: "Client side rate limiter latency in seconds. Broken down by verb, and host.", Buckets: latencyBuckets}, []string{"verb", "host"}),
	requestSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_request_size_bytes",
		Help: "Request size in bytes. Broken down by verb and host.", Buckets: sizeBuckets}, []string{"verb", "host"}),
	responseSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_response_size_bytes",
		Help: "Response size in bytes. Broken down by verb and host.", Buckets: sizeBuckets}, []string{"verb", "host"}),
	results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
		Help: "Number of HTTP requests, partitioned by status code, method, and host."}, []string{"code", "method", "host"}),
	retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_request_retries_total",
		Help: "Number of request retries, partitioned by status code, verb, and host."}, []string{"code", "verb", "host"}),
}

// RegisterRESTClient serves client-go's request metrics from m.
func (m *Metrics) RegisterRESTClient() {
	r := &restClient
	m.Registry.MustRegister(r.latency, r.rateLimiter, r.requestSize, r.responseSize, r.results, r.retries)
	restClientOnce.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency: latencyAdapter{r.latency}, RateLimiterLatency: latencyAdapter{r.rateLimiter},
			RequestSize: sizeAdapter{r.requestSize}, ResponseSize: sizeAdapter{r.responseSize},
			RequestResult: resultAdapter{r.results}, RequestRetry: retryAdapter{r.retries},
		})
	})
}

type latencyAdapter struct{ h *prometheus.HistogramVec }

func (a latencyAdapter) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	a.h.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

type sizeAdapter struct{ h *prometheus.HistogramVec }

func (a sizeAdapter) Observe(_ context.Context, verb, host string, size float64) {
	a.h.WithLabelValues(verb, host).Observe(size)
}

type resultAdapter struct{ c *prometheus.CounterVec }

func (a resultAdapter) Increment(_ context.Context, code, method, host string) {
	a.c.WithLabelValues(code, method, host).Inc()
}

type retryAdapter struct{ c *prometheus.CounterVec }

func (a retryAdapter) IncrementRetry(_ context.Context, code, method, host string) {
	a.c.WithLabelValues(code, method, host).Inc()
}
