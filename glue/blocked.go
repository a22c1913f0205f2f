package glue

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// The KUBE-IPVS-OUT-FILTER rules that keep the node from load-balancer
// VIP:ports whose source ranges leave it out, one rule per VIP:port.
//
// Writing them is the costly part of the glue: iptables parses each rule's
// --vaddr with getaddrinfo, which dumps every address of the node over
// netlink, and kube-ipvs0 holds one per Service. At 10k Services in the
// test VM that is ~60 ms a rule, so 500 blocked VIPs took 56 s to restore.
// The glue therefore writes them ahead of the apply (while a fresh node has
// few addresses), adopts them from the kernel on restart, and edits them
// rule by rule, keeping the chain sorted as a whole write would leave it.

// blockedChain holds the rules.
const blockedChain = "KUBE-IPVS-OUT-FILTER"

// blockedRule is e's rule, after "-A KUBE-IPVS-OUT-FILTER ", as written.
func blockedRule(e objects.Entry) string {
	return fmt.Sprintf("-s %s -m ipvs --vaddr %s --vproto %s --vport %d -j DROP", e.IP, e.IP, e.Protocol, e.Port)
}

// blockedPlan is how a restore brings the chain in line: declare it
// (which creates or flushes it), then apply the edits, "-D" and "-I" lines.
type blockedPlan struct {
	declare bool
	edits   []string
}

func (p blockedPlan) none() bool { return !p.declare && len(p.edits) == 0 }

// payload is the plan alone, for a restore that leaves every other chain be.
func (p blockedPlan) payload() []byte {
	var b strings.Builder
	b.WriteString("*filter\n")
	if p.declare {
		fmt.Fprintf(&b, ":%s - [0:0]\n", blockedChain)
	}
	for _, l := range p.edits {
		b.WriteString(l + "\n")
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String())
}

// planBlocked plans the edits from the rules the chain has (clean: it
// exists and holds only ours, once each, in order; see savedBlocked) to
// want's, both sorted. New rules are inserted where they sort, so the chain
// reads as a whole write would leave it. A chain that is not clean is
// written whole.
func planBlocked(have []objects.Entry, clean bool, want []objects.Entry) blockedPlan {
	var p blockedPlan
	if !clean {
		p.declare, have = true, nil
	}
	for _, e := range have {
		if _, found := slices.BinarySearchFunc(want, e, CompareEntries); !found {
			p.edits = append(p.edits, fmt.Sprintf("-D %s %s", blockedChain, blockedRule(e)))
		}
	}
	// In want's order every rule before the i-th is in place by then.
	for i, e := range want {
		if _, found := slices.BinarySearchFunc(have, e, CompareEntries); !found {
			p.edits = append(p.edits, fmt.Sprintf("-I %s %d %s", blockedChain, i+1, blockedRule(e)))
		}
	}
	return p
}

// CompareEntries is the order blocked lists are kept in: by address,
// protocol and port (what a blocked VIP:port has). It runs at every sync,
// over every blocked VIP, so it formats nothing.
func CompareEntries(a, b objects.Entry) int {
	return cmp.Or(a.IP.Compare(b.IP), cmp.Compare(a.Protocol.String(), b.Protocol.String()), cmp.Compare(a.Port, b.Port))
}

// mergeBlocked returns the sorted union of two sorted lists, and whether
// b added to a.
func mergeBlocked(a, b []objects.Entry) ([]objects.Entry, bool) {
	if slices.Equal(a, b) {
		return a, false // every sync but those that change a blocked VIP
	}
	out := slices.Clone(a)
	for _, e := range b {
		if i, found := slices.BinarySearchFunc(out, e, CompareEntries); !found {
			out = slices.Insert(out, i, e)
		}
	}
	return out, len(out) > len(a)
}

// savedBlocked reads the chain's rules back from iptables-save's output,
// sorted. clean is false when the chain is missing, holds a rule we do not
// write or one twice, or is out of order. A restarted proxier keeps the
// rules it finds rather than rewrite them before it knows its Services.
func savedBlocked(saved []byte) (have []objects.Entry, clean bool) {
	table, exists, foreign := "", false, false
	for _, l := range strings.Split(string(saved), "\n") {
		if t, ok := strings.CutPrefix(l, "*"); ok {
			table = t
			continue
		}
		if table != "filter" {
			continue
		}
		if strings.HasPrefix(l, ":"+blockedChain+" ") {
			exists = true
		}
		rule, ok := strings.CutPrefix(l, "-A "+blockedChain+" ")
		if !ok {
			continue
		}
		if e, ok := parseBlockedRule(rule); ok {
			have = append(have, e)
		} else {
			foreign = true
		}
	}
	inOrder := slices.IsSortedFunc(have, CompareEntries)
	n := len(have)
	slices.SortFunc(have, CompareEntries)
	have = slices.Compact(have)
	return have, exists && !foreign && inOrder && n == len(have)
}

// savedProtocols are the names of the protocol numbers iptables-save prints
// after --vproto.
var savedProtocols = map[string]objects.EntryProtocol{"6": objects.EntryTCP, "17": objects.EntryUDP, "132": objects.EntrySCTP,
	"tcp": objects.EntryTCP, "udp": objects.EntryUDP, "sctp": objects.EntrySCTP}

// parseBlockedRule reads one rule as iptables-save prints it:
// "-s 10.0.0.1/32 -m ipvs --vproto 6 --vaddr 10.0.0.1 --vport 80 -j DROP".
func parseBlockedRule(rule string) (objects.Entry, bool) {
	f := strings.Fields(rule)
	val := map[string]string{}
	for i := 0; i+1 < len(f); i++ {
		if strings.HasPrefix(f[i], "-") {
			val[f[i]] = f[i+1]
		}
	}
	addr, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimSuffix(val["--vaddr"], "/32"), "/128"))
	if err != nil {
		return objects.Entry{}, false
	}
	port, err := strconv.ParseUint(val["--vport"], 10, 16)
	proto := savedProtocols[val["--vproto"]]
	if err != nil || proto == 0 || val["-j"] != "DROP" || val["-m"] != "ipvs" || len(f) != 12 {
		return objects.Entry{}, false
	}
	e := objects.Entry{IP: addr, Protocol: proto, Port: uint16(port)}
	if src, _ := netip.ParsePrefix(val["-s"]); src != netip.PrefixFrom(addr, addr.BitLen()) {
		return objects.Entry{}, false
	}
	return e, true
}
