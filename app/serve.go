package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"go.uber.org/zap"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxyconfig"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/zpages"
)

// serve runs an HTTP server on addr until ctx is done. A bind failure is
// fatal only with --bind-address-hard-fail, as in kube-proxy.
func serve(ctx context.Context, log *zap.Logger, name, addr string, hardFail bool, h http.Handler) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if hardFail {
			return fmt.Errorf("%s server on %s: %w", name, addr, err)
		}
		log.Error("cannot serve; continuing without it", zap.String("server", name), zap.String("address", addr), zap.Error(err))
		return nil
	}
	srv := newServer(h)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("server stopped", zap.String("server", name), zap.Error(err))
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return nil
}

// Every read and write of the health and metrics servers is bounded, so
// that a client that stalls (or a scraper that never reads a big
// /metrics/ipvs) holds no connection and goroutine for long. The write
// bound leaves room for pprof's default 30 s profile.
var serverTimeouts = struct{ readHeader, read, write, idle time.Duration }{
	readHeader: 10 * time.Second, read: 30 * time.Second, write: 2 * time.Minute, idle: 2 * time.Minute,
}

// newServer is an HTTP server of h with serverTimeouts.
func newServer(h http.Handler) *http.Server {
	t := serverTimeouts
	return &http.Server{Handler: h, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read, WriteTimeout: t.write, IdleTimeout: t.idle}
}

// component is the name the z-pages give the program.
const component = "kube-ipvs-proxy"

// serveHTTP starts the health server, and the metrics server with
// /healthz, /livez, /configz, /flagz, /statusz and, with --profiling,
// pprof beside the metrics, as kube-proxy serves them, /debug/state (see stateHandler) and,
// with --ipvs-stats, the IPVS statistics (ipvsStats, else nil).
func serveHTTP(ctx context.Context, log *zap.Logger, o *Options, health *healthz.State, m *metrics.Metrics, p stateSource,
	ipvsStats http.Handler) error {
	if err := serve(ctx, log, "healthz", o.HealthzAddress, o.BindAddressHardFail, health.Handler()); err != nil {
		return err
	}
	configz, err := proxyconfig.Configz(o.Effective)
	if err != nil {
		return err
	}
	extra := map[string]http.Handler{"/healthz": health.Handler(), "/livez": health.Handler(),
		"/configz": http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(configz)
		}),
		"/debug/state": stateHandler(p, o.DebugStateRemote)}
	if ipvsStats != nil {
		extra[metrics.IPVSStatsPath] = ipvsStats
	}
	if o.Profiling {
		extra["/debug/pprof/"] = http.HandlerFunc(pprof.Index)
		extra["/debug/pprof/profile"] = http.HandlerFunc(pprof.Profile)
		extra["/debug/pprof/trace"] = http.HandlerFunc(pprof.Trace)
	}
	// kube-proxy v1.37's z-pages; /statusz lists the server's paths.
	paths := []string{"/metrics", "/proxyMode", "/flagz", "/statusz"}
	for p := range extra {
		paths = append(paths, p)
	}
	extra["/flagz"] = zpages.Flagz(component, o.Flags)
	extra["/statusz"] = zpages.Statusz(component, BuildVersion, o.Started, paths)
	return serve(ctx, log, "metrics", o.MetricsAddress, o.BindAddressHardFail, m.Handler(extra))
}
