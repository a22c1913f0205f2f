package desired

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// defaultStickyTimeout is the ClientIP affinity timeout when the Service sets none.
const defaultStickyTimeout = 10800

// State is the kernel state one Service asks for. It is plain data,
// computed from API objects alone, so it can be compared and tested directly.
type State struct {
	VirtualServers []VirtualServer
	Addresses      []netip.Addr // bound to the dummy link
	Entries        []SetEntry
	// NoLocalEndpoints and NoLocalExternal say, per family, that
	// internalTrafficPolicy or externalTrafficPolicy Local finds a port
	// whose usable endpoints are all on other nodes; upstream counts such
	// Services in its proxier of each family.
	NoLocalEndpoints, NoLocalExternal [len(Families)]bool
	// NodeBlocked are the load-balancer VIP:ports whose source ranges
	// leave out the node's own address: the node may not reach them.
	NodeBlocked []objects.Entry
	// HealthCheckPort, for a LoadBalancer with externalTrafficPolicy
	// Local, serves in each family of the Service (HealthCheckIn) the
	// count of its ready endpoints of that family on this node
	// (LocalReady), as upstream's proxier of each family serves it.
	HealthCheckPort uint16
	HealthCheckIn   [len(Families)]bool
	LocalReady      [len(Families)]int
}

// Keys name a State's kernel objects without their values. The reconciler
// keeps a Service's objects so, between its changes: the values are in its
// tables already (a whole State per Service cost ~6 MB more at 50k).
type Keys struct {
	VirtualServers []objects.Key
	Addresses      []netip.Addr
	Entries        []SetEntry
}

// Keys are st's kernel objects by key; the addresses and entries are st's.
func (st State) Keys() Keys {
	k := Keys{Addresses: st.Addresses, Entries: st.Entries}
	if len(st.VirtualServers) > 0 {
		k.VirtualServers = make([]objects.Key, len(st.VirtualServers))
	}
	for i, v := range st.VirtualServers {
		k.VirtualServers[i] = v.Virtual.Key
	}
	return k
}

// Empty says there are no objects.
func (k Keys) Empty() bool {
	return len(k.VirtualServers) == 0 && len(k.Addresses) == 0 && len(k.Entries) == 0
}

// String prints the state in a stable, readable form: virtual servers
// with their real servers, bound addresses, then sorted set entries and
// the facts for health checks and Events.
func (st State) String() string {
	var lines []string
	for _, v := range st.VirtualServers {
		l := fmt.Sprintf("vs %s %s", v.Virtual.Key, v.Virtual.Scheduler)
		if v.Virtual.Flags != 0 {
			l += fmt.Sprintf(" flags=%#x timeout=%d", v.Virtual.Flags, v.Virtual.Timeout)
		}
		lines = append(lines, l)
		for _, r := range v.Reals {
			lines = append(lines, fmt.Sprintf("  rs %s w=%d", r.ID(), r.Weight))
		}
	}
	for _, a := range st.Addresses {
		lines = append(lines, "addr "+a.String())
	}
	var entries []string
	for _, e := range st.Entries {
		entries = append(entries, "set "+e.String())
	}
	slices.Sort(entries)
	for _, f := range Families {
		if st.NoLocalEndpoints[f] {
			entries = append(entries, "no local "+f.String()+" endpoints")
		}
		if st.NoLocalExternal[f] {
			entries = append(entries, "no local "+f.String()+" endpoints for external traffic")
		}
	}
	for _, e := range st.NodeBlocked {
		entries = append(entries, "node blocked from "+e.String())
	}
	if st.HealthCheckPort != 0 {
		for _, f := range Families {
			if st.HealthCheckIn[f] {
				entries = append(entries, fmt.Sprintf("health check on %d: %d local endpoint (%s)", st.HealthCheckPort, st.LocalReady[f], f))
			}
		}
	}
	return strings.Join(append(lines, entries...), "\n")
}

type VirtualServer struct {
	Virtual objects.VirtualServer
	Reals   []objects.RealServer
	Via     Via // how the Service wants it, should another want it too
}

type SetEntry struct {
	Set   string
	Entry objects.Entry
}

func (e SetEntry) String() string { return e.Set + " " + e.Entry.String() }

// Compute is what svc needs in the kernel given its slices and
// the node's addresses. The second result lists what was skipped and why
// (bad input never stops the rest of the Service from being programmed).
func Compute(svc *Service, slices []*Slice, cfg *Config, node Node) (State, []string) {
	var st State
	if svc == nil || !programsClusterIP(svc) {
		return st, nil
	}
	if cfg.IgnoreExternalIPs && len(svc.ExternalIPs) > 0 {
		without := *svc
		without.ExternalIPs = nil
		svc = &without
	}
	clusterIPs, problems := clusterIPsOf(svc, cfg.IPv6Capable)
	if len(clusterIPs) == 0 {
		return st, problems
	}
	scheduler, problem := schedulerOf(svc, cmp.Or(cfg.Scheduler, DefaultScheduler))
	if problem != "" {
		problems = append(problems, problem)
	}
	sticky, problem := stickyTimeoutOf(svc)
	if problem != "" {
		problems = append(problems, problem)
	}
	externalIPs, externalProblems := externalIPsOf(svc)
	problems = append(problems, externalProblems...)
	lbIPs, lbProblems := loadBalancerIPsOf(svc)
	problems = append(problems, lbProblems...)
	sourceRanges, rangeProblems := sourceRangesOf(svc)
	problems = append(problems, rangeProblems...)
	problems = append(problems, familiesLacking(clusterIPs, "external IP", externalIPs)...)
	problems = append(problems, familiesLacking(clusterIPs, "load-balancer ingress IP", lbIPs)...)
	fams := make([]familyInputs, len(clusterIPs))
	for i, ip := range clusterIPs {
		fam := FamilyOf(ip)
		fams[i] = familyInputs{fam: fam, clusterIP: ip, external: ofFamily(fam, externalIPs), lb: ofFamily(fam, lbIPs),
			ranges: restricting(ofFamily(fam, sourceRanges)), nodePort: ofFamily(fam, node.NodePort)}
	}
	var scheduled bool
	for i := range svc.Ports {
		sp := &svc.Ports[i]
		proto := objects.Protocol(sp.Protocol)
		if proto.Number() == 0 {
			problems = append(problems, fmt.Sprintf("port %q: unknown protocol %q; port skipped", sp.Name, sp.Protocol))
			continue
		}
		if sp.Port <= 0 || sp.Port > 65535 {
			problems = append(problems, fmt.Sprintf("port %q: invalid port %d; port skipped", sp.Name, sp.Port))
			continue
		}
		if j := firstOfPort(svc.Ports, i); j < i {
			problems = append(problems, fmt.Sprintf("port %q: %d/%s is port %q's too; port skipped", sp.Name, sp.Port, sp.Protocol, svc.Ports[j].Name))
			continue
		}
		nodePortOK := sp.NodePort >= 0 && sp.NodePort <= 65535
		if !nodePortOK {
			problems = append(problems, fmt.Sprintf("port %q: invalid nodePort %d; node port skipped", sp.Name, sp.NodePort))
		}
		policy := policiesOf(svc, sp)
		for _, f := range fams {
			eps, epProblems := endpointsFor(sp, slices, cfg.NodeName, f.fam)
			problems = append(problems, epProblems...)
			choice := categorize(eps, policy, cfg.NodeName, node.Zone)
			p := portState{State: &st, fam: f.fam, scheduler: scheduler, sticky: sticky, proto: proto,
				entryProto: objects.EntryProtocolOf(proto), port: uint16(sp.Port)}

			internal, noLocal := choice.pick(policy.internalLocal)
			st.NoLocalEndpoints[f.fam] = st.NoLocalEndpoints[f.fam] || noLocal
			p.clusterIP(f.clusterIP, internal, eps)
			scheduled = true

			external, noLocal := choice.pick(policy.externalLocal)
			if len(f.external)+len(f.lb) > 0 {
				st.NoLocalExternal[f.fam] = st.NoLocalExternal[f.fam] || noLocal
			}
			p.externalIPs(f.external, external, policy.externalLocal)
			p.loadBalancers(f.lb, external, policy.externalLocal, f.ranges, node.Primary[f.fam])

			if sp.NodePort == 0 || !nodePortOK || len(f.nodePort) == 0 {
				continue
			}
			st.NoLocalExternal[f.fam] = st.NoLocalExternal[f.fam] || noLocal
			p.nodePorts(f.nodePort, uint16(sp.NodePort), external, policy.externalLocal)
		}
	}
	if svc.Type == v1.ServiceTypeLoadBalancer && svc.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
		if hc := svc.HealthCheckNodePort; hc <= 0 || hc > 65535 {
			problems = append(problems, fmt.Sprintf("healthCheckNodePort %d is not a port; no health check served", hc))
		} else {
			st.HealthCheckPort = uint16(hc)
			for _, f := range fams {
				st.HealthCheckIn[f.fam] = true
				st.LocalReady[f.fam] = localReady(svc, slices, cfg.NodeName, f.fam)
				st.Entries = append(st.Entries, SetEntry{f.fam.SetName(SetHealthCheckNodePort), objects.Entry{Port: st.HealthCheckPort}})
			}
		}
	}
	if scheduled {
		for _, f := range fams {
			bound := boundAddresses(f.clusterIP, append(append([]netip.Addr(nil), f.external...), f.lb...), node)
			for _, a := range bound {
				if !node.routed(a) {
					st.Addresses = append(st.Addresses, a)
				}
				// Routed or bound, a VIP is in the set the filter
				// rejects other ports of (as upstream's).
				st.Entries = append(st.Entries, SetEntry{f.fam.SetName(SetIPVSIPs), objects.Entry{IP: a}})
			}
		}
	}
	return st, problems
}

// familyInputs are a Service's inputs of one family: its cluster IP of that
// family, and the external and ingress IPs, source ranges and NodePort
// addresses of the same family.
type familyInputs struct {
	fam          Family
	clusterIP    netip.Addr
	external, lb []netip.Addr
	ranges       []netip.Prefix
	nodePort     []netip.Addr
}

// clusterIPsOf lists svc's cluster IPs, one per family (clusterIPs, or
// clusterIP alone from an older apiserver), reporting those it skips: not
// an address, or IPv6 on a node without it.
func clusterIPsOf(svc *Service, ipv6Capable bool) ([]netip.Addr, []string) {
	listed := svc.ClusterIPs
	if len(listed) == 0 {
		listed = []string{svc.ClusterIP}
	}
	var out []netip.Addr
	var problems []string
	for _, s := range listed {
		ip, ok := ParseAddr(s)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("cluster IP %q is not an IP address; skipped", s))
		case FamilyOf(ip) == IPv6 && !ipv6Capable:
			problems = append(problems, fmt.Sprintf("cluster IP %s is IPv6, which this node does not have; skipped", s))
		case slices.ContainsFunc(out, FamilyOf(ip).Holds):
			// The apiserver allows one per family; upstream takes the first.
			problems = append(problems, fmt.Sprintf("cluster IP %s is a second %s one; skipped", s, FamilyOf(ip)))
		default:
			out = append(out, ip)
		}
	}
	return out, problems
}

// familiesLacking reports the addresses of a family svc has no cluster IP
// of: as upstream, they are not programmed.
func familiesLacking(clusterIPs []netip.Addr, what string, addrs []netip.Addr) []string {
	var problems []string
	for _, a := range addrs {
		if !slices.ContainsFunc(clusterIPs, func(c netip.Addr) bool { return FamilyOf(c) == FamilyOf(a) }) {
			problems = append(problems, fmt.Sprintf("%s %s is %s, a family the Service has no cluster IP of; skipped", what, a, FamilyOf(a)))
		}
	}
	return problems
}

// ofFamily picks the addresses or prefixes of one family.
func ofFamily[T interface{ netip.Addr | netip.Prefix }](f Family, in []T) []T {
	var out []T
	for _, x := range in {
		var a netip.Addr
		switch v := any(x).(type) {
		case netip.Addr:
			a = v
		case netip.Prefix:
			a = v.Addr()
		}
		if f.Holds(a) {
			out = append(out, x)
		}
	}
	return out
}

// portState adds one Service port's kernel objects to its State.
type portState struct {
	*State
	fam        Family
	scheduler  string
	sticky     uint32 // the ClientIP affinity timeout, 0 for none
	proto      objects.Protocol
	entryProto objects.EntryProtocol
	port       uint16
}

// virtualServer adds a virtual server on addr:port with eps as real servers.
func (p portState) virtualServer(via Via, addr netip.Addr, port uint16, eps []endpoint) {
	vs := objects.VirtualServer{
		Key:       objects.Key{Address: addr, Protocol: p.proto, Port: port},
		Scheduler: p.scheduler,
	}
	if p.scheduler == "mh" {
		vs.Flags |= objects.FlagSchedPort // as upstream: mh hashes the source port too
	}
	if p.sticky != 0 {
		vs.Flags |= objects.FlagPersistent
		vs.Timeout = p.sticky
	}
	// Sized exactly: the reconciler keeps it for the Service's lifetime.
	vss := VirtualServer{Virtual: vs, Reals: make([]objects.RealServer, 0, len(eps)), Via: via}
	for _, ep := range eps {
		vss.Reals = append(vss.Reals, objects.RealServer{Address: ep.addr, Port: ep.port, Weight: 1})
	}
	p.VirtualServers = append(p.VirtualServers, vss)
}

// entry adds e to the set upstream names set for IPv4, or to its IPv6 twin.
func (p portState) entry(set string, e objects.Entry) {
	p.Entries = append(p.Entries, SetEntry{p.fam.SetName(set), e})
}

// vip is the entry naming addr and this port.
func (p portState) vip(addr netip.Addr) objects.Entry {
	return objects.Entry{IP: addr, Protocol: p.entryProto, Port: p.port}
}

// clusterIP adds the cluster IP's virtual server and entries, and the
// hairpin entries of the endpoints on this node.
func (p portState) clusterIP(ip netip.Addr, real, all []endpoint) {
	p.virtualServer(ViaClusterIP, ip, p.port, real)
	p.entry(SetClusterIP, p.vip(ip))
	for _, ep := range all {
		if ep.local {
			p.entry(SetLoopBack, objects.Entry{IP: ep.addr, Protocol: p.entryProto, Port: ep.port, IP2: ep.addr})
		}
	}
}

// externalIPs adds a virtual server per external IP: traffic from outside
// to an address the node takes as its own.
func (p portState) externalIPs(ips []netip.Addr, real []endpoint, local bool) {
	set := SetExternalIP
	if local {
		set = SetExternalIPLocal
	}
	for _, ip := range ips {
		p.virtualServer(ViaExternalIP, ip, p.port, real)
		p.entry(set, p.vip(ip))
	}
}

// loadBalancers adds a virtual server per ingress IP, with the source
// ranges enforced in KUBE-SOURCE-RANGES-FIREWALL: the node itself passes
// if a range holds its primary address, and is blocked otherwise.
func (p portState) loadBalancers(ips []netip.Addr, real []endpoint, local bool, ranges []netip.Prefix, primary netip.Addr) {
	for _, ip := range ips {
		p.virtualServer(ViaLoadBalancer, ip, p.port, real)
		e := p.vip(ip)
		p.entry(SetLoadBalancer, e)
		if local {
			p.entry(SetLoadBalancerLocal, e)
		}
		if len(ranges) == 0 {
			continue
		}
		p.entry(SetLoadBalancerFW, e)
		fromNode := false
		for _, cidr := range ranges {
			p.entry(SetLoadBalancerSourceNet, objects.Entry{IP: ip, Protocol: p.entryProto, Port: p.port}.WithNet(cidr))
			fromNode = fromNode || cidr.Contains(primary)
		}
		if fromNode {
			// The node reaches the VIP from the VIP itself (bound here).
			p.entry(SetLoadBalancerSourceIP, objects.Entry{IP: ip, Protocol: p.entryProto, Port: p.port, IP2: ip})
		} else {
			p.NodeBlocked = append(p.NodeBlocked, e)
		}
	}
}

// nodePorts adds a virtual server per node address on nodePort, and the
// port to its protocol's sets (hash:ip,port for SCTP: an entry per address).
func (p portState) nodePorts(ips []netip.Addr, nodePort uint16, real []endpoint, local bool) {
	sets := nodePortSets[p.proto]
	add := func(e objects.Entry) {
		p.entry(sets.all, e)
		if local {
			p.entry(sets.local, e)
		}
	}
	for _, ip := range ips {
		p.virtualServer(ViaNodePort, ip, nodePort, real)
		if p.proto == objects.SCTP {
			add(objects.Entry{IP: ip, Protocol: p.entryProto, Port: nodePort})
		}
	}
	if p.proto != objects.SCTP {
		add(objects.Entry{Port: nodePort})
	}
}

// boundAddresses are the Service's addresses bound to kube-ipvs0: its
// cluster IP, and its external IPs that are not the node's already.
func boundAddresses(clusterIP netip.Addr, externalIPs []netip.Addr, node Node) []netip.Addr {
	out := []netip.Addr{clusterIP}
	for _, ip := range externalIPs {
		if !node.Has(ip) && !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out
}

// loadBalancerIPsOf lists svc's load-balancer ingress IPs that traffic
// reaches with their own address (ipMode VIP, the default), reporting those
// it skips. A hostname-only ingress has no IP to program.
func loadBalancerIPsOf(svc *Service) ([]netip.Addr, []string) {
	var out []netip.Addr
	var problems []string
	for _, ing := range svc.Ingress {
		if ing.IP == "" {
			continue
		}
		if ing.IPMode != nil && *ing.IPMode != v1.LoadBalancerIPModeVIP {
			if *ing.IPMode != v1.LoadBalancerIPModeProxy {
				problems = append(problems, fmt.Sprintf("load-balancer ingress %s: unknown ipMode %q; skipped", ing.IP, *ing.IPMode))
			}
			continue // Proxy: the load balancer sends traffic to the node, not to the VIP
		}
		ip, ok := ParseAddr(ing.IP)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("load-balancer ingress IP %q is not an IP address; skipped", ing.IP))
		case !slices.Contains(out, ip):
			out = append(out, ip)
		}
	}
	return out, problems
}

// sourceRangesOf parses svc's loadBalancerSourceRanges. As upstream, a
// range applies to the ingress IPs of its own family only.
func sourceRangesOf(svc *Service) ([]netip.Prefix, []string) {
	var out []netip.Prefix
	var problems []string
	for _, s := range svc.LoadBalancerSourceRanges {
		p, ok := ParsePrefix(strings.TrimSpace(s))
		switch {
		case !ok || p.Addr().Is4In6():
			problems = append(problems, fmt.Sprintf("loadBalancerSourceRanges: %q is not a CIDR; skipped", s))
		default:
			out = append(out, p)
		}
	}
	return out, problems
}

// firstOfPort is the index of the first of ports with the port and protocol
// of ports[i]. The apiserver allows one; a second would program the same
// virtual servers with other endpoints.
func firstOfPort(ports []ServicePort, i int) int {
	return slices.IndexFunc(ports, func(o ServicePort) bool { return o.Port == ports[i].Port && o.Protocol == ports[i].Protocol })
}

// restricting returns one family's source ranges, or none if one is /0:
// as upstream, that allows any source, so the load balancer gets no
// firewall entries (nor could it: hash:ip,port,net refuses a /0 net).
func restricting(ranges []netip.Prefix) []netip.Prefix {
	if slices.ContainsFunc(ranges, func(p netip.Prefix) bool { return p.Bits() == 0 }) {
		return nil
	}
	return ranges
}

// externalIPsOf parses svc's external IPs, reporting those it skips.
func externalIPsOf(svc *Service) ([]netip.Addr, []string) {
	var out []netip.Addr
	var problems []string
	for _, s := range svc.ExternalIPs {
		ip, ok := ParseAddr(s)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("external IP %q is not an IP address; skipped", s))
		case !slices.Contains(out, ip):
			out = append(out, ip)
		}
	}
	return out, problems
}

// nodePortSets are the sets naming a protocol's node ports: all of them,
// and those with externalTrafficPolicy Local (not masqueraded).
var nodePortSets = map[objects.Protocol]struct{ all, local string }{
	objects.TCP:  {SetNodePortTCP, SetNodePortLocalTCP},
	objects.UDP:  {SetNodePortUDP, SetNodePortLocalUDP},
	objects.SCTP: {SetNodePortSCTP, SetNodePortLocalSCTP},
}

// maxStickyTimeout is the longest ClientIP affinity timeout the API allows.
const maxStickyTimeout = 86400

// stickyTimeoutOf is the Service's ClientIP affinity timeout in seconds, 0
// without affinity. The apiserver allows 1..86400; another value (a
// negative one would wrap to 4294967295, nearly forever, as it does
// upstream) is reported and the default used.
func stickyTimeoutOf(svc *Service) (uint32, string) {
	if svc.SessionAffinity != v1.ServiceAffinityClientIP {
		return 0, ""
	}
	if svc.StickySeconds == nil {
		return defaultStickyTimeout, ""
	}
	if t := *svc.StickySeconds; t <= 0 || t > maxStickyTimeout {
		return defaultStickyTimeout, fmt.Sprintf("sessionAffinityConfig.clientIP.timeoutSeconds %d is not in 1..%d; using %d",
			t, maxStickyTimeout, defaultStickyTimeout)
	}
	return uint32(*svc.StickySeconds), ""
}

// schedulerOf is the Service's scheduler: its annotation's, if it names one
// kube-proxy knows, else the node's, with a problem saying why.
func schedulerOf(svc *Service, node string) (string, string) {
	if svc.Scheduler == nil {
		return node, ""
	}
	want := *svc.Scheduler
	i := slices.Index(Schedulers, want)
	if i < 0 {
		return node, fmt.Sprintf("annotation %s: unknown scheduler %q (one of %s); using %s",
			SchedulerAnnotation, want, strings.Join(Schedulers, ", "), node)
	}
	return Schedulers[i], "" // not the annotation's bytes, which hold the Service's (see pack)""
}

// programsClusterIP says whether svc has a virtual IP to program at all.
func programsClusterIP(svc *Service) bool {
	if svc.Type == v1.ServiceTypeExternalName {
		return false
	}
	return svc.ClusterIP != "" && svc.ClusterIP != v1.ClusterIPNone
}
