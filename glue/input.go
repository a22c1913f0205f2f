package glue

import (
	"net/netip"
	"slices"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// Input is what the chains depend on besides the configuration.
type Input struct {
	// InUse are the Sets some Service wants an entry in, by their
	// IPv4 names.
	InUse map[string]bool
	// NodeBlocked are the load-balancer VIP:ports of the family the node
	// may not reach (their source ranges leave it out), sorted.
	NodeBlocked []objects.Entry
	// PodCIDR is the Node's pod CIDR of the family
	// (--detect-local-mode=NodeCIDR).
	PodCIDR netip.Prefix
	// Missing are the sets, by their IPv4 names, that the kernel refused
	// to create (SetMissing): a rule that matches on one would fail the
	// whole restore, so the rules on them wait for them.
	Missing map[string]bool
	// Routed are the family's Service CIDRs a local route makes the
	// node's own (--ipvs-vip-mode=local-route): every address in them is
	// local, allocated or not, so the filter rejects new connections to
	// any of them that no Service port lets through, as it does to a VIP.
	Routed []netip.Prefix
}

func (a Input) equal(b Input) bool {
	return a.sameButBlocked(b) && slices.Equal(a.NodeBlocked, b.NodeBlocked)
}

// sameButBlocked says whether a and b differ at most in their blocked VIPs.
func (a Input) sameButBlocked(b Input) bool {
	return sameSets(a.InUse, b.InUse) && a.PodCIDR == b.PodCIDR && sameSets(a.Missing, b.Missing) && slices.Equal(a.Routed, b.Routed)
}

// sameSets says whether a and b hold the same sets, a set held as false
// being absent (the start-up guess lists one so): the chains differ only
// with the sets in them.
func sameSets(a, b map[string]bool) bool {
	for s, in := range a {
		if in != b[s] {
			return false
		}
	}
	for s, in := range b {
		if in != a[s] {
			return false
		}
	}
	return true
}
