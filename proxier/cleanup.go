package proxier

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// CleanupKernel is what Cleanup removes objects from; a nil part is skipped
// (a kernel without IPVS has no virtual server to remove).
type CleanupKernel struct {
	IPVS     ipvs.Interface
	Link     interface{ DeleteLink() error }
	Sets     interface{ Destroy(set string) error }
	IPTables []iptables.Interface // IPv4 and IPv6
}

// Cleanup removes what IPVS mode leaves in the kernel (--cleanup): our
// iptables chains and the jumps to them (v4 and v6; other chains, such as
// kubelet's, stay), every virtual server outside excluded, kube-ipvs0 with
// its addresses, and our ipsets, the KUBE-6- ones too. It runs in that
// order, since a set cannot go while a rule matches on it, and again finds
// nothing to do.
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

// cleanupPayload is the iptables-restore input that deletes, from an
// iptables-save output, the rules jumping to our chains and then the
// chains themselves; nil when none is there.
func cleanupPayload(saved string) []byte {
	var b strings.Builder
	table, any := "", false
	var deletes, present []string
	flush := func() {
		if len(deletes)+len(present) > 0 {
			fmt.Fprintf(&b, "*%s\n", table)
			for _, d := range deletes {
				b.WriteString(d + "\n")
			}
			for _, c := range present {
				fmt.Fprintf(&b, ":%s - [0:0]\n", c)
			}
			for _, c := range present {
				fmt.Fprintf(&b, "-X %s\n", c)
			}
			b.WriteString("COMMIT\n")
			any = true
		}
		deletes, present = nil, nil
	}
	for _, line := range strings.Split(saved, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case line == "COMMIT":
			flush()
		case strings.HasPrefix(line, ":"):
			chain, _, _ := strings.Cut(line[1:], " ")
			if slices.Contains(glue.Chains[table], chain) {
				present = append(present, chain)
			}
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			target := f[len(f)-1]
			if f[len(f)-2] == "-j" && slices.Contains(glue.Chains[table], target) && !slices.Contains(glue.Chains[table], f[1]) {
				deletes = append(deletes, "-D "+line[len("-A "):])
			}
		}
	}
	if !any {
		return nil
	}
	return []byte(b.String())
}
