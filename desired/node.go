package desired

import (
	"net/netip"
	"slices"
)

// Node is what a sync needs of this node: its addresses, zone and pod
// CIDR.
type Node struct {
	// All are the node's addresses (every link but kube-ipvs0, no loopback
	// or IPv6 link-local): an external IP among them is not bound to
	// kube-ipvs0.
	All []netip.Addr
	// NodePort are those NodePorts are served on: within
	// --nodeport-addresses when it is given.
	NodePort []netip.Addr
	// Primary is the Node's primary address of each family: a load
	// balancer's source ranges that hold it let the node reach the VIP.
	Primary [len(Families)]netip.Addr
	// Zone is the Node's topology.kubernetes.io/zone label, for the
	// endpoints' zone hints.
	Zone string
	// PodCIDR is the Node's first pod CIDR of each family, for
	// --detect-local-mode=NodeCIDR.
	PodCIDR [len(Families)]netip.Prefix
	// Routed are the Service CIDRs one local route each makes the node's
	// own (--ipvs-vip-mode=local-route): a cluster IP inside one is not
	// bound to kube-ipvs0. Empty in the default mode.
	Routed []netip.Prefix
}

// routed says whether a is inside one of the Routed Service CIDRs.
func (a Node) routed(ip netip.Addr) bool {
	for _, p := range a.Routed {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func (a Node) Has(ip netip.Addr) bool { return slices.Contains(a.All, ip) }

func (a Node) Equal(b Node) bool {
	return a.SameAddresses(b) && a.Zone == b.Zone && a.PodCIDR == b.PodCIDR && slices.Equal(a.Routed, b.Routed)
}

func (a Node) SameAddresses(b Node) bool {
	return slices.Equal(a.All, b.All) && slices.Equal(a.NodePort, b.NodePort) && a.Primary == b.Primary
}
