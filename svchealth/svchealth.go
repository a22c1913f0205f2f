// Package svchealth serves the health checks of LoadBalancer Services with
// externalTrafficPolicy Local, each on its healthCheckNodePort: a load
// balancer sends traffic only to the nodes that answer 200, those with a
// ready endpoint of the Service, as upstream kube-proxy answers.
package svchealth

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Service is one health check to serve.
type Service struct {
	Port uint16
	// LocalEndpoints counts the Service's ready endpoints on this node.
	LocalEndpoints int
}

// Server runs one HTTP server per health check port.
type Server struct {
	// healthy reports the proxier's own health: a node whose proxier is
	// behind answers 503 whatever its endpoints.
	healthy func() bool
	// listen opens a port (net.Listen on every address, unless a test
	// says otherwise).
	listen func(port uint16) (net.Listener, error)

	mu      sync.Mutex
	serving map[types.NamespacedName]*check
}

type check struct {
	port      uint16
	endpoints int
	srv       *http.Server
}

// New serves on every address of the node.
func New(healthy func() bool) *Server {
	return &Server{
		healthy: healthy,
		listen: func(port uint16) (net.Listener, error) {
			return net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(int(port))))
		},
		serving: map[types.NamespacedName]*check{},
	}
}

// Sync serves exactly the given health checks: it opens the ports of new
// ones, closes those gone (or moved to another port) and updates the
// endpoint counts. It returns, by Service, the ports it could not open;
// they are tried again at the next Sync.
func (s *Server) Sync(want map[types.NamespacedName]Service) map[types.NamespacedName]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, c := range s.serving {
		if w, ok := want[name]; !ok || w.Port != c.port {
			_ = c.srv.Close()
			delete(s.serving, name)
		}
	}
	failed := map[types.NamespacedName]error{}
	for name, w := range want {
		if c := s.serving[name]; c != nil {
			c.endpoints = w.LocalEndpoints
			continue
		}
		l, err := s.listen(w.Port)
		if err != nil {
			failed[name] = fmt.Errorf("serve the health check of %s on port %d: %w", name, w.Port, err)
			continue
		}
		c := &check{port: w.Port, endpoints: w.LocalEndpoints}
		c.srv = &http.Server{Handler: s.handler(name), ReadHeaderTimeout: 10 * time.Second}
		s.serving[name] = c
		go func() {
			if err := c.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				_ = l.Close()
			}
		}()
	}
	return failed
}

// Close stops every health check.
func (s *Server) Close() {
	s.Sync(nil)
}

// handler answers any path with the Service's local endpoint count.
func (s *Server) handler(name types.NamespacedName) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		c := s.serving[name]
		count := 0
		if c != nil {
			count = c.endpoints
		}
		s.mu.Unlock()
		healthy := s.healthy()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(count))
		if count > 0 && healthy {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintf(w, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d,\n\t\"serviceProxyHealthy\": %v\n}",
			name.Namespace, name.Name, count, healthy)
	})
}
