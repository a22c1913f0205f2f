package glue

import (
	"net/netip"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
)

// Config is what the chains depend on besides the Services.
type Config struct {
	ClusterCIDRs []netip.Prefix
	// DetectLocal (--detect-local-mode) is how traffic from this node's
	// pods is told apart: it reaches cluster IPs unmasqueraded, all other
	// traffic is masqueraded. LocalInterface is the bridge
	// (DetectBridgeInterface) or the interface name prefix
	// (DetectInterfaceNamePrefix).
	DetectLocal    string
	LocalInterface string
	MasqueradeAll  bool
	MasqueradeBit  int
}

// The --detect-local-mode values; empty means DetectClusterCIDR.
const (
	DetectClusterCIDR         = "ClusterCIDR"         // source within --cluster-cidr
	DetectNodeCIDR            = "NodeCIDR"            // source within the Node's pod CIDR
	DetectBridgeInterface     = "BridgeInterface"     // in through --pod-bridge-interface
	DetectInterfaceNamePrefix = "InterfaceNamePrefix" // in through --pod-interface-name-prefix*
)

// notLocal is the iptables match for traffic not from this node's pods, as
// upstream's local traffic detector writes it for a family; empty when it
// cannot tell (no cluster CIDR, or no pod CIDR on the Node yet). Only the
// family's first cluster CIDR counts, as upstream: a match per CIDR would
// send every packet to the masquerade mark through one rule or the other.
func (c *Config) notLocal(fam desired.Family, podCIDR netip.Prefix) string {
	switch c.DetectLocal {
	case DetectNodeCIDR:
		if podCIDR.IsValid() {
			return "! -s " + podCIDR.String()
		}
	case DetectBridgeInterface:
		return "! -i " + c.LocalInterface
	case DetectInterfaceNamePrefix:
		return "! -i " + c.LocalInterface + "+"
	default:
		for _, p := range c.ClusterCIDRs {
			if fam.Holds(p.Addr()) {
				return "! -s " + p.String()
			}
		}
	}
	return ""
}
