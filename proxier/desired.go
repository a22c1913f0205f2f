package proxier

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// defaultStickyTimeout is the ClientIP affinity timeout when the Service sets none.
const defaultStickyTimeout = 10800

// serviceState is the kernel state one Service asks for. It is plain data,
// computed from API objects alone, so it can be compared and tested directly.
type serviceState struct {
	virtualServers []virtualServerState
	addresses      []netip.Addr // bound to the dummy link
	entries        []setEntry
	// noLocalEndpoints and noLocalExternal say that internalTrafficPolicy
	// or externalTrafficPolicy Local finds a port whose usable endpoints
	// are all on other nodes.
	noLocalEndpoints, noLocalExternal bool
	// nodeBlocked are the load-balancer VIP:ports whose source ranges
	// leave out the node's own address: the node may not reach them.
	nodeBlocked []ipset.Entry
	// healthCheckPort, for a LoadBalancer with externalTrafficPolicy
	// Local, serves the count of its ready endpoints on this node,
	// localReady.
	healthCheckPort uint16
	localReady      int
}

type virtualServerState struct {
	vs   ipvs.VirtualServer
	real []ipvs.RealServer
}

type setEntry struct {
	set   string
	entry ipset.Entry
}

func (e setEntry) String() string { return e.set + " " + e.entry.String() }

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

// desiredState computes what svc needs in the kernel given its slices and
// the node's addresses. The second result lists what was skipped and why
// (bad input never stops the rest of the Service from being programmed).
func desiredState(svc *v1.Service, slices []*discovery.EndpointSlice, cfg *Config, node nodeAddrs) (serviceState, []string) {
	var st serviceState
	var problems []string
	if svc == nil || !programsClusterIP(svc) {
		return st, nil
	}
	clusterIP, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !clusterIP.Is4() {
		return st, []string{fmt.Sprintf("cluster IP %q is not an IPv4 address; service skipped", svc.Spec.ClusterIP)}
	}
	scheduler, problem := schedulerOf(svc, cfg.Scheduler)
	if problem != "" {
		problems = append(problems, problem)
	}
	virtualServer := func(addr netip.Addr, proto ipvs.Protocol, port uint16, eps []endpoint) virtualServerState {
		vs := ipvs.VirtualServer{
			Key:       ipvs.Key{Address: addr, Protocol: proto, Port: port},
			Scheduler: scheduler,
		}
		if scheduler == "mh" {
			vs.Flags |= ipvs.FlagSchedPort // as upstream: mh hashes the source port too
		}
		if svc.Spec.SessionAffinity == v1.ServiceAffinityClientIP {
			vs.Flags |= ipvs.FlagPersistent
			vs.Timeout = defaultStickyTimeout
			if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
				vs.Timeout = uint32(*c.ClientIP.TimeoutSeconds)
			}
		}
		// Sized exactly: the reconciler keeps it for the Service's lifetime.
		vss := virtualServerState{vs: vs, real: make([]ipvs.RealServer, 0, len(eps))}
		for _, ep := range eps {
			vss.real = append(vss.real, ipvs.RealServer{Address: ep.addr, Port: ep.port, Weight: 1})
		}
		return vss
	}
	externalIPs, externalProblems := externalIPsOf(svc)
	problems = append(problems, externalProblems...)
	lbIPs, lbProblems := loadBalancerIPsOf(svc)
	problems = append(problems, lbProblems...)
	sourceRanges, rangeProblems := sourceRangesOf(svc)
	problems = append(problems, rangeProblems...)
	var scheduled bool
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		proto := ipvs.Protocol(sp.Protocol)
		if proto.Number() == 0 {
			problems = append(problems, fmt.Sprintf("port %q: unknown protocol %q; port skipped", sp.Name, sp.Protocol))
			continue
		}
		if sp.Port <= 0 || sp.Port > 65535 {
			problems = append(problems, fmt.Sprintf("port %q: invalid port %d; port skipped", sp.Name, sp.Port))
			continue
		}
		eps, epProblems := endpointsFor(sp, slices, cfg.NodeName)
		problems = append(problems, epProblems...)
		policy := policiesOf(svc, sp)
		choice := categorize(eps, policy, cfg.NodeName, node.zone)

		real, noLocal := choice.pick(policy.internalLocal)
		st.noLocalEndpoints = st.noLocalEndpoints || noLocal
		st.virtualServers = append(st.virtualServers, virtualServer(clusterIP, proto, uint16(sp.Port), real))
		scheduled = true

		lower := strings.ToLower(string(proto))
		st.entries = append(st.entries, setEntry{setClusterIP, ipset.Entry{IP: clusterIP, Protocol: lower, Port: uint16(sp.Port)}})
		for _, ep := range eps {
			if ep.local {
				st.entries = append(st.entries, setEntry{setLoopBack, ipset.Entry{IP: ep.addr, Protocol: lower, Port: ep.port, IP2: ep.addr}})
			}
		}

		// External IPs: traffic from outside, to an address the node
		// takes as its own (bound to kube-ipvs0 unless it already is).
		external, noLocal := choice.pick(policy.externalLocal)
		for _, ip := range externalIPs {
			st.noLocalExternal = st.noLocalExternal || noLocal
			st.virtualServers = append(st.virtualServers, virtualServer(ip, proto, uint16(sp.Port), external))
			set := setExternalIP
			if policy.externalLocal {
				set = setExternalIPLocal
			}
			st.entries = append(st.entries, setEntry{set, ipset.Entry{IP: ip, Protocol: lower, Port: uint16(sp.Port)}})
		}

		// Load-balancer ingress IPs: as external IPs, with their own sets,
		// and the source ranges enforced in KUBE-SOURCE-RANGES-FIREWALL.
		for _, ip := range lbIPs {
			st.noLocalExternal = st.noLocalExternal || noLocal
			st.virtualServers = append(st.virtualServers, virtualServer(ip, proto, uint16(sp.Port), external))
			e := ipset.Entry{IP: ip, Protocol: lower, Port: uint16(sp.Port)}
			st.entries = append(st.entries, setEntry{setLoadBalancer, e})
			if policy.externalLocal {
				st.entries = append(st.entries, setEntry{setLoadBalancerLocal, e})
			}
			if len(sourceRanges) == 0 {
				continue
			}
			st.entries = append(st.entries, setEntry{setLoadBalancerFW, e})
			fromNode := false
			for _, cidr := range sourceRanges {
				st.entries = append(st.entries, setEntry{setLoadBalancerSourceNet, ipset.Entry{IP: ip, Protocol: lower, Port: e.Port, Net: cidr}})
				fromNode = fromNode || cidr.Contains(node.primary)
			}
			if fromNode {
				// The node reaches the VIP from the VIP itself (bound here).
				st.entries = append(st.entries, setEntry{setLoadBalancerSourceIP, ipset.Entry{IP: ip, Protocol: lower, Port: e.Port, IP2: ip}})
			} else {
				st.nodeBlocked = append(st.nodeBlocked, e)
			}
		}

		if sp.NodePort == 0 || len(node.nodePort) == 0 {
			continue
		}
		if sp.NodePort < 0 || sp.NodePort > 65535 {
			problems = append(problems, fmt.Sprintf("port %q: invalid nodePort %d; node port skipped", sp.Name, sp.NodePort))
			continue
		}
		nodePort := uint16(sp.NodePort)
		st.noLocalExternal = st.noLocalExternal || noLocal
		sets := nodePortSets[proto]
		for _, ip := range node.nodePort {
			st.virtualServers = append(st.virtualServers, virtualServer(ip, proto, nodePort, external))
			if proto == ipvs.SCTP {
				// SCTP's sets are hash:ip,port: an entry per node address.
				e := ipset.Entry{IP: ip, Protocol: lower, Port: nodePort}
				st.entries = append(st.entries, setEntry{sets.all, e})
				if policy.externalLocal {
					st.entries = append(st.entries, setEntry{sets.local, e})
				}
			}
		}
		if proto != ipvs.SCTP {
			st.entries = append(st.entries, setEntry{sets.all, ipset.Entry{Port: nodePort}})
			if policy.externalLocal {
				st.entries = append(st.entries, setEntry{sets.local, ipset.Entry{Port: nodePort}})
			}
		}
	}
	if svc.Spec.Type == v1.ServiceTypeLoadBalancer && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
		if hc := svc.Spec.HealthCheckNodePort; hc <= 0 || hc > 65535 {
			problems = append(problems, fmt.Sprintf("healthCheckNodePort %d is not a port; no health check served", hc))
		} else {
			st.healthCheckPort = uint16(hc)
			st.localReady = localReady(svc, slices, cfg.NodeName)
			st.entries = append(st.entries, setEntry{setHealthCheckNodePort, ipset.Entry{Port: st.healthCheckPort}})
		}
	}
	if scheduled {
		st.addresses = boundAddresses(clusterIP, append(externalIPs, lbIPs...), node)
		for _, a := range st.addresses {
			st.entries = append(st.entries, setEntry{setIPVSIPs, ipset.Entry{IP: a}})
		}
	}
	return st, problems
}

// localReady counts the distinct addresses of svc's ready endpoints on
// this node, over all its ports: what its health check reports.
func localReady(svc *v1.Service, slices []*discovery.EndpointSlice, nodeName string) int {
	var seen []netip.Addr
	for i := range svc.Spec.Ports {
		eps, _ := endpointsFor(&svc.Spec.Ports[i], slices, nodeName)
		for _, ep := range eps {
			if ep.local && ep.ready && !containsAddr(seen, ep.addr) {
				seen = append(seen, ep.addr)
			}
		}
	}
	return len(seen)
}

func containsAddr(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if a == b {
			return true
		}
	}
	return false
}

// boundAddresses are the Service's addresses bound to kube-ipvs0: its
// cluster IP, and its external IPs that are not the node's already.
func boundAddresses(clusterIP netip.Addr, externalIPs []netip.Addr, node nodeAddrs) []netip.Addr {
	out := []netip.Addr{clusterIP}
	for _, ip := range externalIPs {
		if !node.has(ip) && !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out
}

// loadBalancerIPsOf lists svc's load-balancer ingress IPs that traffic
// reaches with their own address (ipMode VIP, the default), reporting those
// it skips. A hostname-only ingress has no IP to program.
func loadBalancerIPsOf(svc *v1.Service) ([]netip.Addr, []string) {
	var out []netip.Addr
	var problems []string
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP == "" {
			continue
		}
		if ing.IPMode != nil && *ing.IPMode != v1.LoadBalancerIPModeVIP {
			if *ing.IPMode != v1.LoadBalancerIPModeProxy {
				problems = append(problems, fmt.Sprintf("load-balancer ingress %s: unknown ipMode %q; skipped", ing.IP, *ing.IPMode))
			}
			continue // Proxy: the load balancer sends traffic to the node, not to the VIP
		}
		ip, err := netip.ParseAddr(ing.IP)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("load-balancer ingress IP %q is not an IP address; skipped", ing.IP))
		case !ip.Is4():
			problems = append(problems, fmt.Sprintf("load-balancer ingress IP %q is not IPv4 (IPv6 is not programmed yet); skipped", ing.IP))
		case !slices.Contains(out, ip):
			out = append(out, ip)
		}
	}
	return out, problems
}

// sourceRangesOf parses svc's loadBalancerSourceRanges; as upstream, the
// IPv6 ones do not apply to IPv4 ingress IPs.
func sourceRangesOf(svc *v1.Service) ([]netip.Prefix, []string) {
	var out []netip.Prefix
	var problems []string
	for _, s := range svc.Spec.LoadBalancerSourceRanges {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("loadBalancerSourceRanges: %q is not a CIDR; skipped", s))
		case p.Addr().Is4():
			out = append(out, p.Masked())
		}
	}
	return out, problems
}

// externalIPsOf parses svc's external IPs, reporting those it skips.
func externalIPsOf(svc *v1.Service) ([]netip.Addr, []string) {
	var out []netip.Addr
	var problems []string
	for _, s := range svc.Spec.ExternalIPs {
		ip, err := netip.ParseAddr(s)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("external IP %q is not an IP address; skipped", s))
		case !ip.Is4():
			problems = append(problems, fmt.Sprintf("external IP %q is not IPv4 (IPv6 is not programmed yet); skipped", s))
		case !slices.Contains(out, ip):
			out = append(out, ip)
		}
	}
	return out, problems
}

// nodePortSets are the sets naming a protocol's node ports: all of them,
// and those with externalTrafficPolicy Local (not masqueraded).
var nodePortSets = map[ipvs.Protocol]struct{ all, local string }{
	ipvs.TCP:  {setNodePortTCP, setNodePortLocalTCP},
	ipvs.UDP:  {setNodePortUDP, setNodePortLocalUDP},
	ipvs.SCTP: {setNodePortSCTP, setNodePortLocalSCTP},
}

// policies are a Service port's traffic policies, and which kinds of
// endpoint it uses, in upstream's terms.
type policies struct {
	internalLocal, externalLocal bool
	usesCluster, usesLocal       bool
}

func policiesOf(svc *v1.Service, sp *v1.ServicePort) policies {
	p := policies{
		internalLocal: svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == v1.ServiceInternalTrafficPolicyLocal,
		externalLocal: externallyAccessible(svc) && svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal,
	}
	// A port reached from outside needs the cluster endpoints even with
	// externalTrafficPolicy Local: its cluster IP does (upstream's rule).
	external := sp.NodePort != 0 || len(svc.Spec.ExternalIPs) > 0 || len(svc.Status.LoadBalancer.Ingress) > 0
	p.usesCluster = !p.internalLocal || external
	p.usesLocal = p.internalLocal || p.externalLocal && external
	return p
}

// externallyAccessible says whether svc's type takes traffic from outside
// the cluster.
func externallyAccessible(svc *v1.Service) bool {
	switch svc.Spec.Type {
	case v1.ServiceTypeNodePort, v1.ServiceTypeLoadBalancer:
		return true
	}
	return len(svc.Spec.ExternalIPs) > 0
}

// endpointChoice is a port's endpoints sorted the way upstream's
// CategorizeEndpoints sorts them.
type endpointChoice struct {
	cluster, local []endpoint
	// any says some endpoint, here or elsewhere, can take traffic.
	any bool
}

func categorize(eps []endpoint, p policies, nodeName, zone string) endpointChoice {
	all := serving(eps)
	c := endpointChoice{any: len(all) > 0}
	if p.usesCluster {
		c.cluster = serving(byHints(eps, nodeName, zone))
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

// schedulerOf is the Service's scheduler: its annotation's, if it names one
// kube-proxy knows, else the node's, with a problem saying why.
func schedulerOf(svc *v1.Service, node string) (string, string) {
	want, ok := svc.Annotations[SchedulerAnnotation]
	if !ok {
		return node, ""
	}
	if !slices.Contains(Schedulers, want) {
		return node, fmt.Sprintf("annotation %s: unknown scheduler %q (one of %s); using %s",
			SchedulerAnnotation, want, strings.Join(Schedulers, ", "), node)
	}
	return want, ""
}

// programsClusterIP says whether svc has a virtual IP to program at all.
func programsClusterIP(svc *v1.Service) bool {
	if svc.Spec.Type == v1.ServiceTypeExternalName {
		return false
	}
	return svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != v1.ClusterIPNone
}

// endpointsFor collects the endpoints of one Service port over all slices,
// which must be sorted by name.
func endpointsFor(sp *v1.ServicePort, slices []*discovery.EndpointSlice, nodeName string) ([]endpoint, []string) {
	var problems []string
	byID := map[netip.AddrPort]*endpoint{}
	for _, slice := range slices {
		if slice.AddressType != discovery.AddressTypeIPv4 {
			continue
		}
		for _, p := range slice.Ports {
			name := ""
			if p.Name != nil {
				name = *p.Name
			}
			proto := v1.ProtocolTCP
			if p.Protocol != nil {
				proto = *p.Protocol
			}
			if name != sp.Name || proto != sp.Protocol {
				continue
			}
			if p.Port == nil || *p.Port <= 0 || *p.Port > 65535 {
				problems = append(problems, fmt.Sprintf("endpointslice %s port %q: invalid port; port skipped", slice.Name, name))
				continue
			}
			for i := range slice.Endpoints {
				e := &slice.Endpoints[i]
				if len(e.Addresses) == 0 {
					continue
				}
				addr, err := netip.ParseAddr(e.Addresses[0])
				if err != nil || !addr.Is4() {
					problems = append(problems, fmt.Sprintf("endpointslice %s: address %q is not IPv4; endpoint skipped", slice.Name, e.Addresses[0]))
					continue
				}
				// A nil condition means "unknown" and is taken as true, as the API documents.
				ep := &endpoint{
					addr:        addr,
					port:        uint16(*p.Port),
					ready:       e.Conditions.Ready == nil || *e.Conditions.Ready,
					serving:     e.Conditions.Serving == nil || *e.Conditions.Serving,
					terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
					local:       e.NodeName != nil && *e.NodeName == nodeName,
				}
				// The same address in several listings is one endpoint: the
				// first listing wins unless a later one says the endpoint is
				// on this node, as upstream — which meets the slices in map
				// order, at random; we take them in name order, so the
				// result is stable.
				if e.Hints != nil {
					for _, z := range e.Hints.ForZones {
						ep.zones = append(ep.zones, z.Name)
					}
					for _, n := range e.Hints.ForNodes {
						ep.nodes = append(ep.nodes, n.Name)
					}
				}
				id := netip.AddrPortFrom(addr, ep.port)
				if _, seen := byID[id]; !seen || ep.local {
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
