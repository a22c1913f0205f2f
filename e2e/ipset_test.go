//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
)

// TestIPSetCountsFromTheHeader checks that a set's entry count, read from
// its header alone, follows adds and deletes, as ipset's own listing does,
// for the set types the proxier uses.
func TestIPSetCountsFromTheHeader(t *testing.T) {
	t.Parallel()
	const ns = "kip-ipset-count"
	h := ipsetIn(t, ns)
	sets := []ipset.Set{
		{Name: "KIP-TEST-IPPORT", Type: ipset.HashIPPort, Family: "inet", MaxElem: 1024},
		{Name: "KIP-TEST-IPS", Type: ipset.HashIP, Family: "inet", MaxElem: 1024},
		{Name: "KIP-TEST-PORTS", Type: ipset.BitmapPort, Family: "inet"},
	}
	for _, s := range sets {
		if err := h.EnsureSet(s); err != nil {
			t.Fatal(err)
		}
	}
	count := func(set string, want int) {
		t.Helper()
		if got, err := h.Count(set); err != nil || got != want {
			t.Errorf("Count(%s) = %d, %v; want %d", set, got, err, want)
		}
		saved, err := framework.Output("ip", "netns", "exec", ns, "ipset", "list", "-t", set)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(saved, fmt.Sprintf("Number of entries: %d\n", want)) {
			t.Errorf("ipset list -t %s disagrees with %d:\n%s", set, want, saved)
		}
	}
	count("KIP-TEST-IPPORT", 0)
	entries := []ipset.Entry{
		{IP: mustAddr("10.96.0.1"), Protocol: ipset.EntryTCP, Port: 443},
		{IP: mustAddr("10.96.0.10"), Protocol: ipset.EntryUDP, Port: 53},
		{IP: mustAddr("10.96.0.10"), Protocol: ipset.EntryTCP, Port: 53},
	}
	for _, err := range h.AddEntries("KIP-TEST-IPPORT", entries) {
		if err != nil {
			t.Fatal(err)
		}
	}
	count("KIP-TEST-IPPORT", 3)
	for _, err := range h.DeleteEntries("KIP-TEST-IPPORT", entries[:1]) {
		if err != nil {
			t.Fatal(err)
		}
	}
	count("KIP-TEST-IPPORT", 2)
	for _, err := range h.AddEntries("KIP-TEST-IPS", []ipset.Entry{{IP: mustAddr("10.96.0.1")}, {IP: mustAddr("10.96.0.10")}}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	count("KIP-TEST-IPS", 2)
	// bitmap:port takes port-only entries (the NodePort sets).
	ports := []ipset.Entry{{Port: 30080}, {Port: 30443}}
	for _, err := range h.AddEntries("KIP-TEST-PORTS", ports) {
		if err != nil {
			t.Fatal(err)
		}
	}
	count("KIP-TEST-PORTS", 2)
	if got, err := h.Entries("KIP-TEST-PORTS"); err != nil || len(got) != 2 || !slices.Contains(got, ports[0]) || !slices.Contains(got, ports[1]) {
		t.Errorf("Entries(KIP-TEST-PORTS) = %v, %v; want %v", got, err, ports)
	}
	for _, err := range h.DeleteEntries("KIP-TEST-PORTS", ports[:1]) {
		if err != nil {
			t.Fatal(err)
		}
	}
	count("KIP-TEST-PORTS", 1)
	if _, err := h.Count("KIP-TEST-MISSING"); err == nil {
		t.Error("Count of a missing set gave no error")
	}
}

// TestIPSetGrowsInPlace: Grow gives a set a larger maxelem with its entries,
// the iptables rule that matches on it keeps doing so, and it then takes
// entries beyond its old size; no temporary set is left.
func TestIPSetGrowsInPlace(t *testing.T) {
	t.Parallel()
	const ns = "kip-ipset-grow"
	h := ipsetIn(t, ns)
	set := ipset.Set{Name: "KIP-TEST-GROW", Type: ipset.HashIPPort, Family: "inet", HashSize: 1024, MaxElem: 1024}
	if err := h.EnsureSet(set); err != nil {
		t.Fatal(err)
	}
	entries := func(from, to int) []ipset.Entry {
		var out []ipset.Entry
		for i := from; i < to; i++ {
			out = append(out, ipset.Entry{IP: mustAddr(fmt.Sprintf("10.96.%d.%d", i/256, i%256)), Protocol: ipset.EntryTCP, Port: 80})
		}
		return out
	}
	if err := errors.Join(h.AddEntries(set.Name, entries(0, 1024))...); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(h.AddEntries(set.Name, entries(1024, 1025))...); err == nil {
		t.Fatal("a full set took one more entry: the test proves nothing")
	}
	const rule = "OUTPUT -m set --match-set KIP-TEST-GROW dst,dst -j RETURN"
	if _, err := framework.Output(append([]string{"ip", "netns", "exec", ns, "iptables", "-A"}, strings.Fields(rule)...)...); err != nil {
		t.Fatal(err)
	}

	if err := h.Grow(set, 4096); err != nil {
		t.Fatal(err)
	}
	if c, err := h.Capacity(set.Name); err != nil || c != 4096 {
		t.Errorf("capacity %d, %v; want 4096", c, err)
	}
	got, err := h.Entries(set.Name)
	if err != nil || len(got) != 1024 {
		t.Fatalf("%d entries after growing, %v; want 1024", len(got), err)
	}
	if err := errors.Join(h.AddEntries(set.Name, entries(1024, 3000))...); err != nil {
		t.Errorf("the grown set refused entries: %v", err)
	}
	saved, err := framework.Output("ip", "netns", "exec", ns, "iptables-save")
	if err != nil || !strings.Contains(saved, "-A "+rule) {
		t.Errorf("the rule on the set is gone after the swap (%v):\n%s", err, saved)
	}
	listed, _ := framework.Output("ip", "netns", "exec", ns, "ipset", "list", "-n")
	if strings.Contains(listed, "KIP-GROW-") {
		t.Errorf("a temporary set is left: %s", listed)
	}
}

// TestSetsMadeAtIPSetToolsRevisions: every set the proxier makes is made at
// the revision ipset(8), which upstream kube-proxy runs, makes it at on this
// kernel: the same where the kernel knows today's revisions (Linux 6.1 and
// later) and the kernel's highest where it is older (Linux 5.10, which
// refused the pinned revision 6 of hash:ip,port,ip and so every Service).
func TestSetsMadeAtIPSetToolsRevisions(t *testing.T) {
	t.Parallel()
	const ns = "kip-ipset-rev"
	h := ipsetIn(t, ns)
	revision := func(set string) string {
		t.Helper()
		out, err := framework.Output("ip", "netns", "exec", ns, "ipset", "list", "-t", set)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(out, "\n") {
			if r, ok := strings.CutPrefix(l, "Revision: "); ok {
				return r
			}
		}
		t.Fatalf("no revision in ipset list -t %s:\n%s", set, out)
		return ""
	}
	seen := map[string]bool{}
	for i, s := range desired.AllSets() {
		kind := string(s.Type) + " " + s.Family
		if seen[kind] {
			continue
		}
		seen[kind] = true
		ours, tools := fmt.Sprintf("KIP-REV-OURS-%d", i), fmt.Sprintf("KIP-REV-TOOL-%d", i)
		s.Name = ours
		if err := h.EnsureSet(s); err != nil {
			t.Errorf("%s: %v", kind, err)
			continue
		}
		args := []string{"ip", "netns", "exec", ns, "ipset", "create", tools, string(s.Type)}
		if s.Type == ipset.BitmapPort {
			args = append(args, "range", "0-65535")
		} else {
			args = append(args, "family", s.Family)
		}
		if _, err := framework.Output(args...); err != nil {
			t.Fatal(err)
		}
		if got, want := revision(ours), revision(tools); got != want {
			t.Errorf("%s: made at revision %s, ipset(8) makes it at %s", kind, got, want)
		} else {
			t.Logf("%s: revision %s", kind, got)
		}
	}
}

// TestIPSetEntriesReadBackAsWritten: for every set type and family the
// proxier makes, Entries lists what was written, as ipset(8) itself lists
// it (`ipset save`, upstream kube-proxy's reader); one set is big enough
// for the kernel to answer in many messages.
func TestIPSetEntriesReadBackAsWritten(t *testing.T) {
	t.Parallel()
	const ns = "kip-ipset-list"
	h := ipsetIn(t, ns)
	shapes := func(typ ipset.Type, v6 bool) []ipset.Entry {
		a, b, net := mustAddr("10.96.0.1"), mustAddr("10.244.1.7"), netip.MustParsePrefix("192.0.2.0/24")
		if v6 {
			a, b, net = mustAddr("fd00::1"), mustAddr("fd00:244::7"), netip.MustParsePrefix("2001:db8::/64")
		}
		switch typ {
		case ipset.BitmapPort:
			return []ipset.Entry{{Port: 30080}, {Port: 0}, {Port: 65535}}
		case ipset.HashIP:
			return []ipset.Entry{{IP: a}, {IP: b}}
		case ipset.HashIPPort:
			return []ipset.Entry{{IP: a, Protocol: ipset.EntryTCP, Port: 443}, {IP: a, Protocol: ipset.EntryUDP, Port: 53}, {IP: b, Protocol: ipset.EntrySCTP, Port: 9}}
		case ipset.HashIPPortIP:
			return []ipset.Entry{{IP: b, Protocol: ipset.EntryTCP, Port: 8080, IP2: b}, {IP: b, Protocol: ipset.EntryUDP, Port: 53, IP2: a}}
		case ipset.HashIPPortNet:
			return []ipset.Entry{
				ipset.Entry{IP: a, Protocol: ipset.EntryTCP, Port: 80}.WithNet(net),
				ipset.Entry{IP: a, Protocol: ipset.EntryTCP, Port: 80}.WithNet(netip.PrefixFrom(b, 8).Masked()),
				ipset.Entry{IP: a, Protocol: ipset.EntryUDP, Port: 53}.WithNet(netip.PrefixFrom(b, b.BitLen())), // a host
			}
		}
		t.Fatalf("no entries for set type %s", typ)
		return nil
	}
	seen := map[string]bool{}
	for i, s := range desired.AllSets() {
		kind := string(s.Type) + " " + s.Family
		if seen[kind] || s.Type == ipset.BitmapPort && seen[string(s.Type)] {
			continue
		}
		seen[kind], seen[string(s.Type)] = true, true
		s.Name = fmt.Sprintf("KIP-LIST-%d", i)
		want := shapes(s.Type, s.Family == "inet6")
		if s.Type == ipset.HashIPPort && s.Family == "inet" {
			// Thousands of entries: an answer of many messages.
			for p := range 3000 {
				want = append(want, ipset.Entry{IP: mustAddr("10.96.7.7"), Protocol: ipset.EntryTCP, Port: uint16(1000 + p)})
			}
		}
		if err := h.EnsureSet(s); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if err := errors.Join(h.AddEntries(s.Name, want)...); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		got, err := h.Entries(s.Name)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		saved, err := framework.Output("ip", "netns", "exec", ns, "ipset", "save", s.Name)
		if err != nil {
			t.Fatal(err)
		}
		var tools []string
		for _, l := range strings.Split(saved, "\n") {
			if e, ok := strings.CutPrefix(l, "add "+s.Name+" "); ok {
				tools = append(tools, e)
			}
		}
		strs := func(es []ipset.Entry) []string {
			var out []string
			for _, e := range es {
				out = append(out, e.String())
			}
			slices.Sort(out)
			return out
		}
		slices.Sort(tools)
		if g, w := strs(got), strs(want); !slices.Equal(g, w) || !slices.Equal(tools, w) {
			t.Errorf("%s: listed %d entries, ipset save %d, written %d; first listed %q, saved %q, written %q",
				kind, len(g), len(tools), len(w), head(g), head(tools), head(w))
		}
	}
	if _, err := h.Entries("KIP-LIST-MISSING"); !errors.Is(err, ipset.ErrNoSet) {
		t.Errorf("Entries of a missing set: %v, want ErrNoSet", err)
	}
}

// head is the first few of a list, for a failure message.
func head(s []string) []string { return s[:min(len(s), 4)] }

// ipsetIn opens the ipsets of a new network namespace, removed when t ends.
func ipsetIn(t *testing.T, ns string) *ipset.Netlink {
	t.Helper()
	var h *ipset.Netlink
	var err error
	inNetns(t, ns, func() { h, err = ipset.NewNetlink() })
	if err != nil {
		t.Fatal(err)
	}
	return h
}
