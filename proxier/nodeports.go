package proxier

import (
	"net/netip"
	"slices"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
)

// nodeIPs tracks the addresses NodePorts are served on: the node's own
// IPv4 addresses (every link but kube-ipvs0, no loopback), within
// --nodeport-addresses when it is given. The kernel's list is re-read at
// every drift check and whenever the Node changes; a change recomputes the
// Services that have node ports, and nothing else.
type nodeIPs struct {
	// primary is the Node's primary IPv4 address (for the "primary"
	// keyword), written by the Node informer; changed says it changed
	// since the sync goroutine last looked.
	mu      sync.Mutex
	primary netip.Addr
	changed bool

	// current is the list in use, and read says it has been read once;
	// both owned by the sync goroutine.
	current []netip.Addr
	read    bool
}

// setPrimary records the Node's primary address and reports whether it changed.
func (n *nodeIPs) setPrimary(a netip.Addr) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if a == n.primary {
		return false
	}
	n.primary, n.changed = a, true
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

// nodePortFilter keeps the addresses NodePorts are served on, as upstream: all of
// them without --nodeport-addresses, else those within its CIDRs or equal
// to the Node's primary address.
func (c *Config) nodePortFilter(all []netip.Addr, primary netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, a := range all {
		if !a.Is4() {
			continue // IPv6 Services are not programmed yet
		}
		ok := len(c.NodePortAddresses) == 0 && !c.NodePortPrimary ||
			c.NodePortPrimary && a == primary ||
			slices.ContainsFunc(c.NodePortAddresses, func(p netip.Prefix) bool { return p.Contains(a) })
		if ok {
			out = append(out, a)
		}
	}
	return out
}

// primaryIPv4 is the Node's primary IPv4 address, as kubelet reports it:
// the first InternalIP, else the first ExternalIP.
func primaryIPv4(node *v1.Node) netip.Addr {
	if node == nil {
		return netip.Addr{}
	}
	for _, typ := range []v1.NodeAddressType{v1.NodeInternalIP, v1.NodeExternalIP} {
		for _, a := range node.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); a.Type == typ && err == nil && ip.Is4() {
				return ip
			}
		}
	}
	return netip.Addr{}
}

// refreshNodeIPs re-reads the node's addresses and, if the NodePort
// addresses changed, queues every Service with a node port for
// recomputation. It runs on the sync goroutine, before the inputs are taken.
func (p *Proxier) refreshNodeIPs() {
	p.nodeIPs.takeChanged()
	p.nodeIPs.read = true
	if p.kernel.NodeAddrs == nil {
		return
	}
	all, err := p.kernel.NodeAddrs.Addresses()
	if err != nil {
		p.log.Warn("could not list the node's addresses; NodePorts keep the previous ones", zap.Error(err))
		return
	}
	p.nodeIPs.mu.Lock()
	primary := p.nodeIPs.primary
	p.nodeIPs.mu.Unlock()
	if p.cfg.NodePortPrimary && !primary.IsValid() {
		p.log.Warn("--nodeport-addresses has 'primary' but the Node reports no IPv4 address yet")
	}
	next := p.cfg.nodePortFilter(all, primary)
	if slices.Equal(next, p.nodeIPs.current) {
		return
	}
	p.log.Info("NodePort addresses changed", zap.Stringers("from", p.nodeIPs.current), zap.Stringers("to", next))
	p.nodeIPs.current = next
	p.changeTracker.touch(hasNodePorts)
}

// hasNodePorts says whether any port of svc has a node port.
func hasNodePorts(svc *v1.Service) bool {
	return slices.ContainsFunc(svc.Spec.Ports, func(sp v1.ServicePort) bool { return sp.NodePort != 0 })
}
