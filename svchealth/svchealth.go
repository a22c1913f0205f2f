// Package svchealth serves the health checks of LoadBalancer Services with
// externalTrafficPolicy Local, each on its healthCheckNodePort: a load
// balancer sends traffic only to the nodes that answer 200, those with a
// ready endpoint of the Service, as upstream kube-proxy answers.
//
// Each IP family of a Service is served on listeners of its own (tcp4,
// tcp6) with the count of that family's endpoints: upstream runs a proxier
// per family, each with its own health-check server, so a load balancer
// that checks a node over IPv6 learns about the Service's IPv6 endpoints.
package svchealth

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
)

// Service is one health check to serve.
type Service struct {
	Port uint16
	// In are the Service's IP families; each is served with its own
	// count of ready endpoints on this node, LocalEndpoints.
	In             [len(desired.Families)]bool
	LocalEndpoints [len(desired.Families)]int
}

// Listen says where one family's health checks listen: on the family's
// wildcard address (All), or on each of Addrs, the node's addresses
// --nodeport-addresses keeps, as upstream binds them.
type Listen struct {
	All   bool
	Addrs []netip.Addr
}

// Equal says whether l and m listen on the same addresses.
func (l Listen) Equal(m Listen) bool { return l.All == m.All && slices.Equal(l.Addrs, m.Addrs) }

// Server runs the health checks' HTTP servers.
type Server struct {
	// healthy reports the proxier's own health: a node whose proxier is
	// behind answers 503 whatever its endpoints.
	healthy func() bool
	// listen opens a listener (net.Listen, unless a test says otherwise).
	listen func(network, addr string) (net.Listener, error)

	mu      sync.Mutex
	on      [len(desired.Families)]Listen
	serving map[types.NamespacedName]*check
}

type check struct {
	want Service
	srvs []*http.Server
}

func (c *check) close() {
	for _, s := range c.srvs {
		_ = s.Close()
	}
	c.srvs = nil
}

// New returns a server that serves nothing until Sync says where and what.
func New(healthy func() bool) *Server {
	return &Server{healthy: healthy, listen: net.Listen, serving: map[types.NamespacedName]*check{}}
}

// Sync serves exactly the given health checks, each family on the
// addresses on says: it opens the ports of new ones, closes those gone (or
// moved to another port, family or address) and updates the endpoint
// counts. It returns, by Service, the ports it could not open; they are
// tried again at the next Sync.
func (s *Server) Sync(want map[types.NamespacedName]Service, on [len(desired.Families)]Listen) map[types.NamespacedName]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	moved := false
	for _, f := range desired.Families {
		moved = moved || !s.on[f].Equal(on[f])
	}
	s.on = on
	for name, c := range s.serving {
		if w, ok := want[name]; moved || !ok || w.Port != c.want.Port || w.In != c.want.In {
			c.close()
			delete(s.serving, name)
		}
	}
	failed := map[types.NamespacedName]error{}
	for name, w := range want {
		if c := s.serving[name]; c != nil {
			c.want = w
			continue
		}
		c := &check{want: w}
		if err := s.open(name, c); err != nil {
			failed[name] = fmt.Errorf("serve the health check of %s on port %d: %w", name, w.Port, err)
			continue
		}
		s.serving[name] = c
	}
	return failed
}

// open listens for c in each of its families, all or nothing: a port one
// address refuses is tried again whole at the next Sync.
func (s *Server) open(name types.NamespacedName, c *check) error {
	port := strconv.Itoa(int(c.want.Port))
	for _, f := range desired.Families {
		if !c.want.In[f] {
			continue
		}
		network, addrs := "tcp4", []string{"0.0.0.0"}
		if f == desired.IPv6 {
			network, addrs = "tcp6", []string{"::"}
		}
		if !s.on[f].All {
			addrs = addrs[:0]
			for _, a := range s.on[f].Addrs {
				addrs = append(addrs, a.String())
			}
		}
		for _, a := range addrs {
			l, err := s.listen(network, net.JoinHostPort(a, port))
			if err != nil {
				c.close()
				return err
			}
			srv := &http.Server{Handler: s.handler(name, f), ReadHeaderTimeout: 10 * time.Second}
			c.srvs = append(c.srvs, srv)
			go func() {
				if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
					_ = l.Close()
				}
			}()
		}
	}
	return nil
}

// Close stops every health check.
func (s *Server) Close() {
	s.Sync(nil, [len(desired.Families)]Listen{})
}

// handler answers any path with the count of the Service's local endpoints
// of family f.
func (s *Server) handler(name types.NamespacedName, f desired.Family) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		c := s.serving[name]
		count := 0
		if c != nil {
			count = c.want.LocalEndpoints[f]
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
