package desired

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"

	v1 "k8s.io/api/core/v1"
)

// Which endpoints a virtual server gets, as upstream's CategorizeEndpoints
// and IPVS syncEndpoint choose them.

// endpoint is one address:port of a Service port, merged over all its slices.
type endpoint struct {
	addr        netip.Addr
	port        uint16
	ready       bool
	serving     bool
	terminating bool
	local       bool // on this node
	// zones and nodes are the endpoint's topology hints (hints.forZones,
	// hints.forNodes).
	zones, nodes []string
}

// policies are a Service port's traffic policies, and which kinds of
// endpoint it uses, in upstream's terms.
type policies struct {
	internalLocal, externalLocal bool
	usesCluster, usesLocal       bool
}

func policiesOf(svc *Service, sp *ServicePort) policies {
	p := policies{
		internalLocal: svc.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal,
		externalLocal: externallyAccessible(svc) && svc.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal,
	}
	// A port reached from outside needs the cluster endpoints even with
	// externalTrafficPolicy Local: its cluster IP does (upstream's rule).
	external := sp.NodePort != 0 || len(svc.ExternalIPs) > 0 || len(svc.Ingress) > 0
	p.usesCluster = !p.internalLocal || external
	p.usesLocal = p.internalLocal || p.externalLocal && external
	return p
}

// externallyAccessible says whether svc's type takes traffic from outside
// the cluster.
func externallyAccessible(svc *Service) bool {
	switch svc.Type {
	case v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer:
		return true
	}
	return len(svc.ExternalIPs) > 0
}

// endpointChoice is a port's endpoints sorted the way upstream's
// CategorizeEndpoints sorts them.
type endpointChoice struct {
	cluster, local []endpoint
	// any says some endpoint, here or elsewhere, can take traffic.
	any bool
}

func categorize(eps []endpoint, p policies, hintedNode, zone string) endpointChoice {
	all := serving(eps)
	c := endpointChoice{any: len(all) > 0}
	if p.usesCluster {
		c.cluster = serving(byHints(eps, hintedNode, zone))
	}
	if p.usesLocal {
		c.local = serving(local(eps))
	}
	return c
}

// pick returns the real servers of a virtual server whose traffic policy
// is Local (onlyLocal) or Cluster. As upstream's IPVS mode does, a Local
// one without local endpoints falls back to the cluster endpoints, which a
// Service that uses no cluster endpoints has none of (traffic is dropped):
// noLocal then says usable endpoints exist elsewhere.
func (c endpointChoice) pick(onlyLocal bool) (eps []endpoint, noLocal bool) {
	if !onlyLocal {
		return c.cluster, false
	}
	if len(c.local) > 0 {
		return c.local, false
	}
	return c.cluster, c.any
}

// localReady counts the distinct addresses of svc's ready endpoints of one
// family on this node, over all its ports: what its health check reports.
func localReady(svc *Service, sl []*Slice, nodeName string, fam Family) int {
	var seen []netip.Addr
	for i := range svc.Ports {
		eps, _ := endpointsFor(&svc.Ports[i], sl, nodeName, fam)
		for _, ep := range eps {
			if ep.local && ep.ready && !slices.Contains(seen, ep.addr) {
				seen = append(seen, ep.addr)
			}
		}
	}
	return len(seen)
}

// endpointsFor collects the endpoints of one Service port in one family
// over all slices, which must be sorted by name.
func endpointsFor(sp *ServicePort, slices []*Slice, nodeName string, fam Family) ([]endpoint, []string) {
	var problems []string
	byID := map[netip.AddrPort]*endpoint{}
	for _, slice := range slices {
		if slice.AddressType != fam.addressType() {
			continue
		}
		for _, p := range slice.Ports {
			if p.Name != sp.Name || p.Protocol != sp.Protocol {
				continue
			}
			if p.Port <= 0 || p.Port > 65535 {
				problems = append(problems, fmt.Sprintf("endpointslice %s port %q: invalid port; port skipped", slice.Name, p.Name))
				continue
			}
			for i := range slice.Endpoints {
				e := &slice.Endpoints[i]
				if e.Address == "" {
					continue
				}
				addr, ok := ParseAddr(e.Address)
				if !ok || !fam.Holds(addr) {
					problems = append(problems, fmt.Sprintf("endpointslice %s: address %q is not %s; endpoint skipped", slice.Name, e.Address, fam))
					continue
				}
				ep := &endpoint{
					addr:        addr,
					port:        uint16(p.Port),
					ready:       e.Ready,
					serving:     e.Serving,
					terminating: e.Terminating,
					local:       e.NodeName != "" && e.NodeName == nodeName,
				}
				// The same address in several listings is one endpoint: one
				// that is not terminating wins, as in kube-proxy v1.37
				// (v1.34 preferred one on this node), else the first.
				// Upstream meets the slices in map order, at random, and
				// keeps the last that is not terminating; we take them in
				// name order and keep the first, so the result is stable.
				if e.Hints != nil {
					ep.zones, ep.nodes = e.Hints.Zones, e.Hints.Nodes
				}
				id := netip.AddrPortFrom(addr, ep.port)
				if had, seen := byID[id]; !seen || had.terminating && !ep.terminating {
					byID[id] = ep
				}
			}
		}
	}
	out := make([]endpoint, 0, len(byID))
	for _, ep := range byID {
		out = append(out, *ep)
	}
	sort.Slice(out, func(i, j int) bool {
		return netip.AddrPortFrom(out[i].addr, out[i].port).Compare(netip.AddrPortFrom(out[j].addr, out[j].port)) < 0
	})
	return out, problems
}

// byHints narrows the endpoints by their topology hints, with upstream's
// all-or-nothing rule, level by level: if every ready endpoint is hinted
// for some node and one for this node, to those hinted for this node (the
// Service's trafficDistribution PreferSameNode); else, by the same rule, to
// those hinted for this node's zone (PreferSameZone, PreferClose);
// otherwise the hints are ignored.
func byHints(eps []endpoint, nodeName, zone string) []endpoint {
	for _, level := range []struct {
		hints func(endpoint) []string
		want  string
	}{
		{func(ep endpoint) []string { return ep.nodes }, nodeName},
		{func(ep endpoint) []string { return ep.zones }, zone},
	} {
		all, match := true, false
		for _, ep := range eps {
			if ep.ready {
				h := level.hints(ep)
				all = all && len(h) > 0
				match = match || level.want != "" && slices.Contains(h, level.want)
			}
		}
		if !all || !match {
			continue
		}
		var out []endpoint
		for _, ep := range eps {
			if slices.Contains(level.hints(ep), level.want) {
				out = append(out, ep)
			}
		}
		return out
	}
	return eps
}

// local picks the endpoints on this node.
func local(eps []endpoint) []endpoint {
	var out []endpoint
	for _, ep := range eps {
		if ep.local {
			out = append(out, ep)
		}
	}
	return out
}

// serving picks the endpoints that get traffic: the ready ones, or, when
// none is ready, the ones still serving while terminating.
func serving(eps []endpoint) []endpoint {
	var ready, fallback []endpoint
	for _, ep := range eps {
		switch {
		case ep.ready:
			ready = append(ready, ep)
		case ep.serving && ep.terminating:
			fallback = append(fallback, ep)
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return fallback
}
