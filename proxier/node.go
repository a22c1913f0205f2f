package proxier

import (
	"net/netip"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/svchealth"
)

// nodeIPs tracks what desired.Compute needs of this node: its addresses, read
// from the kernel at every drift check and whenever the Node changes, and
// the Node's primary address and zone. A change recomputes the Services
// that use them, and nothing else.
type nodeIPs struct {
	// node is what the Node says (its primary addresses are for the
	// "primary" keyword), written by the Node informer; changed says it
	// changed since the sync goroutine last looked.
	mu      sync.Mutex
	node    nodeFacts
	changed bool

	// current is the list in use, and read says it has been read once;
	// both owned by the sync goroutine.
	current desired.Node
	read    bool
}

// nodeFacts are what the Node object says of this node.
type nodeFacts struct {
	primary [len(desired.Families)]netip.Addr
	zone    string
	podCIDR [len(desired.Families)]netip.Prefix
}

func factsOf(node *v1.Node) nodeFacts {
	if node == nil {
		return nodeFacts{}
	}
	f := nodeFacts{zone: node.Labels[v1.LabelTopologyZone]}
	cidrs := node.Spec.PodCIDRs
	if len(cidrs) == 0 && node.Spec.PodCIDR != "" {
		cidrs = []string{node.Spec.PodCIDR}
	}
	for _, fam := range desired.Families {
		f.primary[fam] = primaryIP(node, fam)
		for _, c := range cidrs {
			if p, ok := desired.ParsePrefix(c); ok && fam.Holds(p.Addr()) {
				f.podCIDR[fam] = p
				break
			}
		}
	}
	return f
}

// setNode records what the Node says, and reports whether it changed.
func (n *nodeIPs) setNode(f nodeFacts) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if f == n.node {
		return false
	}
	n.node, n.changed = f, true
	return true
}

// takeChanged reports whether the Node changed since the last call.
func (n *nodeIPs) takeChanged() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.changed
	n.changed = false
	return c
}

// nodePortFilter keeps the addresses NodePorts are served on, as upstream
// decides per IP family: those within --nodeport-addresses' CIDRs of the
// family or equal to the Node's primary address of the family ('primary';
// a loopback one counts as none), and every address of a family the list
// says nothing of.
func (c *Config) nodePortFilter(all []netip.Addr, primary [len(desired.Families)]netip.Addr) []netip.Addr {
	within := c.nodePortCIDRs(primary)
	var out []netip.Addr
	for _, a := range all {
		cidrs := within[desired.FamilyOf(a)]
		if len(cidrs) == 0 || slices.ContainsFunc(cidrs, func(p netip.Prefix) bool { return p.Contains(a) }) {
			out = append(out, a)
		}
	}
	return out
}

// nodePortCIDRs are --nodeport-addresses' CIDRs by family, 'primary' made
// the primary address's own; none for a family means every address.
func (c *Config) nodePortCIDRs(primary [len(desired.Families)]netip.Addr) [len(desired.Families)][]netip.Prefix {
	var within [len(desired.Families)][]netip.Prefix
	for _, p := range c.NodePortAddresses {
		f := desired.FamilyOf(p.Addr())
		within[f] = append(within[f], p)
	}
	if c.NodePortPrimary {
		for f, a := range primary {
			if a.IsValid() && !a.IsLoopback() {
				within[f] = append(within[f], netip.PrefixFrom(a, a.BitLen()))
			}
		}
	}
	return within
}

// healthCheckListen says where the LoadBalancers' health checks listen in
// each family, as upstream binds them: on the family's wildcard address
// when --nodeport-addresses keeps every address of it, else on each node
// address it keeps (which, unlike upstream's list read once at start-up,
// follows the node's addresses).
func (p *Proxier) healthCheckListen() [len(desired.Families)]svchealth.Listen {
	var on [len(desired.Families)]svchealth.Listen
	node := p.nodeIPs.current
	within := p.cfg.nodePortCIDRs(node.Primary)
	for _, f := range p.families() {
		if len(within[f]) == 0 || slices.ContainsFunc(within[f], func(p netip.Prefix) bool { return p.Bits() == 0 }) {
			on[f].All = true
			continue
		}
		for _, a := range node.NodePort {
			if f.Holds(a) {
				on[f].Addrs = append(on[f].Addrs, a)
			}
		}
	}
	return on
}

// primaryIP is the Node's primary address of a family, as kubelet reports
// it: the first InternalIP, else the first ExternalIP.
func primaryIP(node *v1.Node, fam desired.Family) netip.Addr {
	if node == nil {
		return netip.Addr{}
	}
	for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if ip, ok := desired.ParseAddr(a.Address); a.Type == typ && ok && fam.Holds(ip) {
				return ip
			}
		}
	}
	return netip.Addr{}
}

// refreshNodeIPs re-reads the node's addresses and, if they or the Node
// changed, queues every Service that uses them for recomputation. It runs
// on the sync goroutine, before the inputs are taken. A failed read keeps
// the previous list; with none yet, it returns the error and nothing may be
// computed (see waitForNodeAddrs).
func (p *Proxier) refreshNodeIPs() error {
	p.nodeIPs.takeChanged()
	if p.kernel.NodeAddrs == nil {
		p.nodeIPs.read = true
		return nil
	}
	listed, err := p.kernel.NodeAddrs.Addresses()
	if err != nil {
		if !p.nodeIPs.read {
			return err
		}
		p.log.Warn("could not list the node's addresses; NodePorts and external IPs keep the previous ones", zap.Error(err))
		listed = p.nodeIPs.current.All // what the Node says may still have changed
	}
	p.nodeIPs.read = true
	p.nodeIPs.mu.Lock()
	node := p.nodeIPs.node
	p.nodeIPs.mu.Unlock()
	var next desired.Node
	for _, a := range listed {
		if p.cfg.Desired.IPv6Capable || desired.FamilyOf(a) == desired.IPv4 {
			next.All = append(next.All, a)
		}
	}
	primary := node.primary
	if o := p.cfg.PrimaryOverride; o.IsValid() {
		primary[desired.FamilyOf(o)] = o
	}
	next.NodePort = p.cfg.nodePortFilter(next.All, primary)
	next.Primary, next.Zone, next.PodCIDR = primary, node.zone, node.podCIDR
	cur := p.nodeIPs.current
	next.Routed = cur.Routed // syncRoutes' to change
	if next.Equal(cur) {
		return nil
	}
	p.log.Info("node changed", zap.Stringers("addresses", next.All), zap.Stringers("nodePorts", next.NodePort),
		zap.Stringers("primary", validOnly(next.Primary[:])), zap.String("zone", next.Zone), zap.Stringers("podCIDR", validOnly(next.PodCIDR[:])))
	if p.cfg.NodePortPrimary && !primary[desired.IPv4].IsValid() && !primary[desired.IPv6].IsValid() {
		p.log.Warn("--nodeport-addresses has 'primary' but the Node reports no address yet; a family the list names no CIDR of is served on every address meanwhile, as upstream")
	}
	if p.cfg.Glue.DetectLocal == glue.DetectNodeCIDR && !node.podCIDR[desired.IPv4].IsValid() {
		p.log.Warn("--detect-local-mode=NodeCIDR but the Node has no IPv4 pod CIDR yet; until it has, cluster-IP traffic is masqueraded as without a cluster CIDR")
	}
	switch {
	case next.Zone != cur.Zone:
		// Any Service's endpoints may carry zone hints; a node changes
		// zone about never.
		p.changeTracker.touch(func(*desired.Service) bool { return true })
	case !next.SameAddresses(cur):
		p.changeTracker.touch(usesNodeAddrs)
	}
	p.nodeIPs.current = next
	return nil
}

// waitForNodeAddrs holds a sync back while the node's addresses have never
// been read, and retries it with backoff. Computed from no addresses, every
// NodePort would be unwanted, and deleted from a kernel a restarted proxier
// finds them in, and an external IP the node holds would be bound to
// kube-ipvs0.
func (p *Proxier) waitForNodeAddrs(err error) {
	backoff := min(p.cfg.SyncPeriod, time.Second<<min(p.drift.failures, 10))
	p.drift.failures++
	p.runner.RetryAt(time.Now().Add(backoff))
	p.metrics.SyncFailuresTotal.Inc()
	p.log.Error("could not list the node's addresses; nothing is written until they are read", zap.Error(err), zap.Duration("retryIn", backoff))
}

// usesNodeAddrs says whether svc's state depends on the node's addresses
// (or its primary one).
func usesNodeAddrs(svc *desired.Service) bool {
	return len(svc.ExternalIPs) > 0 || len(svc.Ingress) > 0 ||
		slices.ContainsFunc(svc.Ports, func(sp desired.ServicePort) bool { return sp.NodePort != 0 })
}

// validOnly drops the zero values of a per-family array, for logs.
func validOnly[T interface {
	IsValid() bool
	String() string
}](in []T) []T {
	var out []T
	for _, x := range in {
		if x.IsValid() {
			out = append(out, x)
		}
	}
	return out
}
