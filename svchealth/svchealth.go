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
	// srvs are the servers of each family, by the address they listen on.
	srvs [len(desired.Families)]map[string]*http.Server
}

// closeExcept closes family f's servers on any address but keep's.
func (c *check) closeExcept(f desired.Family, keep []string) {
	for a, srv := range c.srvs[f] {
		if !slices.Contains(keep, a) {
			_ = srv.Close()
			delete(c.srvs[f], a)
		}
	}
}

func (c *check) close() {
	for _, f := range desired.Families {
		c.closeExcept(f, nil)
	}
}

// New returns a server that serves nothing until Sync says where and what.
func New(healthy func() bool) *Server {
	return &Server{healthy: healthy, listen: net.Listen, serving: map[types.NamespacedName]*check{}}
}

// Sync serves exactly the given health checks, each family on the
// addresses on says: it opens what is missing, closes what is no longer
// wanted (a Service gone or moved to another port, a family it left, an
// address gone) and updates the endpoint counts. Each family and address
// stands alone: one that cannot be opened (a port taken, an address not
// yet usable) leaves the others serving. It returns, by Service, what it
// could not open; that is tried again at the next Sync.
func (s *Server) Sync(want map[types.NamespacedName]Service, on [len(desired.Families)]Listen) map[types.NamespacedName]error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = on
	for name, c := range s.serving {
		if w, ok := want[name]; !ok || w.Port != c.want.Port {
			c.close()
			delete(s.serving, name)
		}
	}
	failed := map[types.NamespacedName]error{}
	for name, w := range want {
		c := s.serving[name]
		if c == nil {
			c = &check{}
			s.serving[name] = c
		}
		c.want = w
		var errs []error
		for _, f := range desired.Families {
			var addrs []string
			if w.In[f] {
				addrs = s.addresses(f)
			}
			c.closeExcept(f, addrs)
			errs = append(errs, s.open(name, c, f, addrs)...)
		}
		if len(errs) > 0 {
			failed[name] = fmt.Errorf("serve the health check of %s on port %d: %w", name, w.Port, errors.Join(errs...))
		}
	}
	return failed
}

// addresses are where family f's checks listen.
func (s *Server) addresses(f desired.Family) []string {
	if s.on[f].All {
		if f == desired.IPv6 {
			return []string{"::"}
		}
		return []string{"0.0.0.0"}
	}
	out := make([]string, 0, len(s.on[f].Addrs))
	for _, a := range s.on[f].Addrs {
		out = append(out, a.String())
	}
	return out
}

// open listens for c's family f on each of addrs it does not listen on yet.
func (s *Server) open(name types.NamespacedName, c *check, f desired.Family, addrs []string) []error {
	network := "tcp4"
	if f == desired.IPv6 {
		network = "tcp6"
	}
	var errs []error
	for _, a := range addrs {
		if _, ok := c.srvs[f][a]; ok {
			continue
		}
		l, err := s.listen(network, net.JoinHostPort(a, strconv.Itoa(int(c.want.Port))))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		srv := &http.Server{Handler: s.handler(name, f), ReadHeaderTimeout: 10 * time.Second}
		if c.srvs[f] == nil {
			c.srvs[f] = map[string]*http.Server{}
		}
		c.srvs[f][a] = srv
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				_ = l.Close()
			}
		}()
	}
	return errs
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
