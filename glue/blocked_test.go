package glue

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// savedForm prints a blocked rule the way iptables-save does: a prefix
// length on -s, and --vproto first, as a number.
func savedForm(rule string) string {
	var ip, proto, port string
	if _, err := fmt.Sscanf(rule, "-s %s -m ipvs --vaddr %s --vproto %s --vport %s -j DROP", &ip, &ip, &proto, &port); err != nil {
		return rule
	}
	bits := map[bool]string{true: "/32", false: "/128"}[strings.Contains(ip, ".")]
	num := map[string]string{"tcp": "6", "udp": "17", "sctp": "132"}[proto]
	return fmt.Sprintf("-s %s%s -m ipvs --vproto %s --vaddr %s --vport %s -j DROP", ip, bits, num, ip, port)
}

func blockedVIP(ip, proto string, port uint16) objects.Entry {
	p := map[string]objects.EntryProtocol{"tcp": objects.EntryTCP, "udp": objects.EntryUDP, "sctp": objects.EntrySCTP}[proto]
	return objects.Entry{IP: netip.MustParseAddr(ip), Protocol: p, Port: port}
}

// blockedRules are the rules in KUBE-IPVS-OUT-FILTER, as saved, in order.
func blockedRules(t *testing.T, ipt *iptables.Fake) []string {
	t.Helper()
	saved, err := ipt.Save()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(saved), "\n") {
		if r, ok := strings.CutPrefix(l, "-A "+blockedChain+" "); ok {
			out = append(out, r)
		}
	}
	return out
}

func TestSavedBlocked(t *testing.T) {
	saved := strings.Join([]string{
		"*nat",
		"-A KUBE-IPVS-OUT-FILTER -s 10.0.0.9/32 -m ipvs --vproto 6 --vaddr 10.0.0.9 --vport 80 -j DROP", // another table
		"*filter",
		":KUBE-IPVS-OUT-FILTER - [0:0]",
		"-A KUBE-IPVS-OUT-FILTER -s 10.0.0.2/32 -m ipvs --vproto 132 --vaddr 10.0.0.2 --vport 81 -j DROP",
		"-A KUBE-IPVS-OUT-FILTER -s fd00::1/128 -m ipvs --vproto 17 --vaddr fd00::1 --vport 53 -j DROP",
		"-A KUBE-IPVS-OUT-FILTER -s 10.0.0.1/32 -m ipvs --vproto 6 --vaddr 10.0.0.1 --vport 80 -j DROP",
		"-A KUBE-IPVS-OUT-FILTER -s 10.0.0.1/32 -m ipvs --vproto 6 --vaddr 10.0.0.1 --vport 80 -j DROP", // twice
		"-A KUBE-IPVS-OUT-FILTER -s 10.0.0.3/32 -m ipvs --vproto 6 --vaddr 10.0.0.4 --vport 80 -j DROP", // not ours
		"-A KUBE-IPVS-OUT-FILTER -s 10.0.0.5/32 -m ipvs --vproto 6 --vaddr 10.0.0.5 --vport 80 -j ACCEPT",
		"-A KUBE-IPVS-OUT-FILTER -s 10.0.0.6/32 -m ipvs --vproto 47 --vaddr 10.0.0.6 --vport 80 -j DROP",
		"-A KUBE-IPVS-OUT-FILTER -s 10.0.0.7/32 -m comment --comment x -m ipvs --vproto 6 --vaddr 10.0.0.7 --vport 80 -j DROP",
		"-A KUBE-FORWARD -s 10.0.0.8/32 -m ipvs --vproto 6 --vaddr 10.0.0.8 --vport 80 -j DROP",
		"COMMIT",
	}, "\n")
	want := []objects.Entry{blockedVIP("10.0.0.1", "tcp", 80), blockedVIP("10.0.0.2", "sctp", 81), blockedVIP("fd00::1", "udp", 53)}
	slices.SortFunc(want, CompareEntries)
	if got, clean := savedBlocked([]byte(saved)); !slices.Equal(got, want) || clean {
		t.Errorf("read %v (clean %v), want %v, not clean", got, clean, want)
	}
	ours := "*filter\n:KUBE-IPVS-OUT-FILTER - [0:0]\n-A KUBE-IPVS-OUT-FILTER " + savedForm(blockedRule(want[0])) + "\nCOMMIT\n"
	if got, clean := savedBlocked([]byte(ours)); !slices.Equal(got, want[:1]) || !clean {
		t.Errorf("read %v (clean %v), want %v, clean", got, clean, want[:1])
	}
	if got, clean := savedBlocked([]byte("*filter\nCOMMIT\n")); len(got) > 0 || clean {
		t.Errorf("without the chain: read %v (clean %v), want none, not clean", got, clean)
	}
	for _, e := range want {
		if got, ok := parseBlockedRule(savedForm(blockedRule(e))); !ok || got != e {
			t.Errorf("%v written and saved reads back as %v (%v)", e, got, ok)
		}
	}
}

// TestBlockedRulesEditedOneByOne: the glue deletes and appends just the
// blocked VIPs' rules that differ, whether what changed is what we want
// or the kernel; the other chains are rewritten only when they change.
func TestBlockedRulesEditedOneByOne(t *testing.T) {
	ipt := &iptables.Fake{Canonical: savedForm}
	g := &Glue{ipt: ipt, cfg: &Config{MasqueradeBit: 14}}
	a, b, c := blockedVIP("10.0.0.1", "tcp", 80), blockedVIP("10.0.0.2", "tcp", 80), blockedVIP("10.0.0.3", "udp", 53)
	inUse := map[string]bool{desired.SetClusterIP: true}
	step := func(in Input, wantPayload string, wantDrifted bool) {
		t.Helper()
		g.Use(in)
		restores := len(ipt.Payloads)
		drifted, _, err := g.Ensure(true)
		if err != nil {
			t.Fatal(err)
		}
		if drifted != wantDrifted {
			t.Errorf("drifted %v, want %v", drifted, wantDrifted)
		}
		switch {
		case wantPayload == "" && len(ipt.Payloads) != restores:
			t.Fatalf("restored %q, want nothing", ipt.Payloads[restores])
		case wantPayload == "full" && (len(ipt.Payloads) != restores+1 || !strings.HasPrefix(ipt.Payloads[restores], "*nat\n")):
			t.Fatalf("%d restores, want one full rewrite: %q", len(ipt.Payloads)-restores, ipt.Payloads[restores:])
		case wantPayload != "" && wantPayload != "full" && (len(ipt.Payloads) != restores+1 || ipt.Payloads[restores] != wantPayload):
			t.Fatalf("restored %q, want %q", ipt.Payloads[restores:], wantPayload)
		}
		var want []string // in order: as a whole write would leave them
		for _, e := range in.NodeBlocked {
			want = append(want, savedForm(blockedRule(e)))
		}
		if got := blockedRules(t, ipt); !slices.Equal(got, want) {
			t.Fatalf("blocked rules %q, want %q", got, want)
		}
	}
	rule := func(edit string, e objects.Entry) string {
		return fmt.Sprintf("%s %s %s\n", edit, blockedChain, blockedRule(e))
	}
	insert := func(at int, e objects.Entry) string {
		return fmt.Sprintf("-I %s %d %s\n", blockedChain, at, blockedRule(e))
	}
	edits := func(lines ...string) string { return "*filter\n" + strings.Join(lines, "") + "COMMIT\n" }
	step(Input{InUse: inUse, NodeBlocked: []objects.Entry{a, b}}, "full", false)
	step(Input{InUse: inUse, NodeBlocked: []objects.Entry{a, b}}, "", false)
	step(Input{InUse: inUse, NodeBlocked: []objects.Entry{b, c}}, edits(rule("-D", a), insert(2, c)), false)
	step(Input{InUse: inUse, NodeBlocked: []objects.Entry{b, c}}, "", false)
	// Inserted where it sorts, not appended.
	step(Input{InUse: inUse, NodeBlocked: []objects.Entry{a, b, c}}, edits(insert(1, a)), false)
	step(Input{InUse: inUse}, edits(rule("-D", a), rule("-D", b), rule("-D", c)), false)
	lb := map[string]bool{desired.SetClusterIP: true, desired.SetLoadBalancer: true}
	step(Input{InUse: lb, NodeBlocked: []objects.Entry{a}}, "full", false)
	// A rule deleted behind our back is put back alone.
	if err := ipt.Restore([]byte(edits(rule("-D", a)))); err != nil {
		t.Fatal(err)
	}
	step(Input{InUse: lb, NodeBlocked: []objects.Entry{a, c}},
		edits(insert(1, a), insert(2, c)), true)
	// A rule of someone else's in the chain, or ours out of order: it is
	// flushed and written whole.
	if err := ipt.Restore([]byte(edits("-A KUBE-IPVS-OUT-FILTER -j DROP\n"))); err != nil {
		t.Fatal(err)
	}
	step(Input{InUse: lb, NodeBlocked: []objects.Entry{a}},
		edits(":KUBE-IPVS-OUT-FILTER - [0:0]\n", insert(1, a)), true)
	if err := ipt.Restore([]byte(edits(insert(1, c)))); err != nil {
		t.Fatal(err)
	}
	step(Input{InUse: lb, NodeBlocked: []objects.Entry{a, c}},
		edits(":KUBE-IPVS-OUT-FILTER - [0:0]\n", insert(1, a), insert(2, c)), true)
}

// TestBlockedRulesKeptOnRestart: a restarted proxier keeps the blocked
// rules it finds until its first sync says otherwise, and rewrites
// nothing when that sync wants the same.
func TestBlockedRulesKeptOnRestart(t *testing.T) {
	ipt := &iptables.Fake{Canonical: savedForm}
	cfg := &Config{MasqueradeBit: 14}
	blocked := []objects.Entry{blockedVIP("10.0.0.1", "tcp", 80), blockedVIP("10.0.0.2", "sctp", 81)}
	slices.SortFunc(blocked, CompareEntries)
	in := Input{InUse: map[string]bool{desired.SetClusterIP: true, desired.SetLoadBalancer: true}, NodeBlocked: blocked}
	before := &Glue{ipt: ipt, cfg: cfg}
	before.Use(in)
	if _, _, err := before.Ensure(true); err != nil {
		t.Fatal(err)
	}
	want := blockedRules(t, ipt)

	after := &Glue{ipt: ipt, cfg: cfg}
	after.Guess(map[string]bool{desired.SetClusterIP: true, desired.SetLoadBalancer: true})
	if _, _, err := after.Ensure(false); err != nil {
		t.Fatal(err)
	}
	if got := blockedRules(t, ipt); !slices.Equal(got, want) {
		t.Fatalf("after the restart's setup the blocked rules are %q, want %q", got, want)
	}
	// The first sync's critical Services alone add nothing.
	if _, grew := after.Grow(Input{InUse: map[string]bool{desired.SetClusterIP: true}}); grew {
		t.Error("the critical Services grew the adopted chains")
	}
	if after.Use(in) {
		t.Error("the full sync, wanting what was there, changed the chains")
	}
}
