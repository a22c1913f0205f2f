package proxier

import (
	"net/netip"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
)

// Config is what the proxier needs from the command line.
type Config struct {
	// Config is what the desired state of a Service depends on besides
	// the API objects. IPv6Capable also makes the KUBE-6- ipsets and
	// ip6tables chains be created even without IPv6 Services, as
	// upstream does.
	desired.Config
	SyncPeriod    time.Duration // forced full sync (drift check)
	MinSyncPeriod time.Duration // rate limit between syncs
	ClusterCIDRs  []netip.Prefix
	// DetectLocal (--detect-local-mode) is how traffic from this node's
	// pods is told apart: it reaches cluster IPs unmasqueraded, all other
	// traffic is masqueraded. LocalInterface is the bridge
	// (DetectBridgeInterface) or the interface name prefix
	// (DetectInterfaceNamePrefix).
	DetectLocal    string
	LocalInterface string
	MasqueradeAll  bool
	MasqueradeBit  int
	ExcludeCIDRs   []netip.Prefix
	// NodePortAddresses (--nodeport-addresses) limits the node addresses
	// NodePorts are served on to these CIDRs, and to the Node's primary
	// address with NodePortPrimary; neither means every address.
	NodePortAddresses []netip.Prefix
	NodePortPrimary   bool
	// PrimaryOverride (--bind-address, when not 0.0.0.0 or ::) is the
	// node's primary address of its family in place of the Node's, as
	// upstream: it decides whether load-balancer source ranges hold the
	// node, and is the 'primary' of --nodeport-addresses.
	PrimaryOverride netip.Addr
	// CriticalServices are programmed before all others in a sync, so
	// that they answer early in a long cold start.
	CriticalServices []types.NamespacedName
	// AfterFirstSync, if set, is called once, on a goroutine of its own,
	// when the first sync has succeeded.
	AfterFirstSync func()
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

func (c *Config) excluded(a netip.Addr) bool {
	for _, p := range c.ExcludeCIDRs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
