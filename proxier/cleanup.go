package proxier

import (
	"errors"
	"net/netip"
	"slices"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/leftovers"
)

// CleanupKernel is what Cleanup removes objects from; a nil part is skipped
// (a kernel without IPVS has no virtual server to remove).
type CleanupKernel struct {
	IPVS ipvs.Interface
	Link interface{ DeleteLink() error }
	// Routes are --ipvs-vip-mode=local-route's, through lo: they outlive
	// kube-ipvs0, and would keep every Service CIDR's address the node's.
	Routes   dummyiface.Router
	Sets     interface{ Destroy(set string) error }
	IPTables []iptables.Interface // IPv4 and IPv6
	// Conntrack forgets the UDP flows to the removed virtual servers.
	Conntrack conntrack.Interface
}

// Cleanup removes what IPVS mode leaves in the kernel (--cleanup): our
// iptables chains and the jumps to them (v4 and v6; other chains, such as
// kubelet's, stay), every virtual server outside excluded, our local
// routes, kube-ipvs0 with its addresses, and our ipsets, the KUBE-6- ones
// too. It runs in that order, since a set cannot go while a rule matches
// on it, and again finds nothing to do.
//
// The UDP flows to the removed virtual servers are forgotten too: a
// client's next datagram on the same source port would otherwise match
// the flow's conntrack entry, skip the NAT rules of whatever proxy now
// runs (kube-proxy's iptables mode, after a rollback) and be refused.
func Cleanup(k CleanupKernel, excluded []netip.Prefix) error {
	var errs []error
	for _, ipt := range k.IPTables {
		saved, err := ipt.Save()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if payload := cleanupPayload(string(saved)); payload != nil {
			errs = append(errs, ipt.Restore(payload))
		}
	}
	if k.IPVS != nil {
		list, err := k.IPVS.VirtualServers()
		errs = append(errs, err)
		var ops []ipvs.Op
		for _, vs := range list {
			if !slices.ContainsFunc(excluded, func(p netip.Prefix) bool { return p.Contains(vs.Key.Address) }) {
				ops = append(ops, ipvs.Op{Kind: ipvs.DeleteVS, VS: vs})
			}
		}
		errs = append(errs, k.IPVS.Write(ops)...)
		errs = append(errs, forgetUDPFlows(k.Conntrack, ops))
	}
	if k.Routes != nil {
		errs = append(errs, k.Routes.SetLocalRoutes(nil))
	}
	if k.Link != nil {
		errs = append(errs, k.Link.DeleteLink())
	}
	if k.Sets != nil {
		for _, s := range desired.AllSets() {
			errs = append(errs, k.Sets.Destroy(s.Name))
		}
	}
	return errors.Join(errs...)
}

// forgetUDPFlows deletes the conntrack entries of UDP flows to the
// virtual servers deleted by ops, one pass per family.
func forgetUDPFlows(ct conntrack.Interface, ops []ipvs.Op) error {
	if ct == nil {
		return nil
	}
	byFamily := map[bool][]conntrack.Stale{}
	for _, op := range ops {
		if k := op.VS.Key; k.Protocol == ipvs.UDP {
			byFamily[k.Address.Is4()] = append(byFamily[k.Address.Is4()], conntrack.Stale{VIP: netip.AddrPortFrom(k.Address, k.Port)})
		}
	}
	var errs []error
	for _, stale := range byFamily {
		_, err := ct.Clear(stale)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cleanupPayload is the iptables-restore input that deletes, from an
// iptables-save output, the rules jumping to our chains and then the
// chains themselves; nil when none is there. In a table where kube-proxy's
// iptables mode runs (after a rollback to it), the chains it shares with
// us by name hold its rules, and stay with the jumps to them; only our
// rules on our sets go from them (iptables mode uses no ipset).
func cleanupPayload(saved string) []byte {
	var b strings.Builder
	table := ""
	var deletes, present []string
	iptablesMode := false
	ours := func(chain string) bool {
		return slices.Contains(glue.Chains[table], chain) && !(iptablesMode && leftovers.SharedWithIPTablesMode(table, chain))
	}
	for _, line := range strings.Split(saved, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table, deletes, present, iptablesMode = line[1:], nil, nil, false
		case strings.HasPrefix(line, ":"):
			chain, _, _ := strings.Cut(line[1:], " ")
			present = append(present, chain)
			iptablesMode = iptablesMode || leftovers.IPTablesModeChain(table, chain)
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			if len(f) < 2 {
				continue // not iptables-save's; nothing to delete
			}
			target := iptables.JumpTarget(f)
			ourFirewallJump := target == "KUBE-PROXY-FIREWALL" && strings.Contains(line, glue.FirewallJumpComment)
			jumpsToOurs := target != "" && (ours(target) || ourFirewallJump) && !ours(f[1])
			// A shared chain iptables mode has not rewritten yet (its
			// other family still syncing) holds our rules on our sets.
			ourRuleInShared := iptablesMode && leftovers.SharedWithIPTablesMode(table, f[1]) && strings.Contains(line, "--match-set KUBE-")
			if jumpsToOurs || ourRuleInShared {
				deletes = append(deletes, line)
			}
		case line == "COMMIT":
			present = slices.DeleteFunc(present, func(c string) bool { return !ours(c) })
			iptables.WriteRemoval(&b, table, deletes, present)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return []byte(b.String())
}
