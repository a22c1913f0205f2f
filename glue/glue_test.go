package glue

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
)

func TestGlueMasqueradeRules(t *testing.T) {
	const masq = `-m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP`
	cidrs := []netip.Prefix{netip.MustParsePrefix("fd00::/64"), netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.245.0.0/16")}
	podCIDR := netip.MustParsePrefix("10.244.3.0/24")
	notLocal := func(match string) string {
		return "-A KUBE-SERVICES " + match + " " + masq + " dst,dst -j KUBE-MARK-MASQ"
	}
	fromVIP := "-A KUBE-SERVICES " + masq + " src,dst -j KUBE-MARK-MASQ"
	for _, c := range []struct {
		name    string
		cfg     Config
		podCIDR netip.Prefix
		want    string
	}{
		{"default", Config{MasqueradeBit: 14}, podCIDR, fromVIP},
		{"masquerade-all", Config{MasqueradeBit: 14, MasqueradeAll: true, ClusterCIDRs: cidrs}, podCIDR, "-A KUBE-SERVICES " + masq + " dst,dst -j KUBE-MARK-MASQ"},
		// The first IPv4 CIDR alone: a rule per CIDR would mark everything.
		{"cluster-cidr", Config{MasqueradeBit: 14, ClusterCIDRs: cidrs}, podCIDR, notLocal("! -s 10.244.0.0/16")},
		{"ClusterCIDR mode", Config{MasqueradeBit: 14, ClusterCIDRs: cidrs, DetectLocal: DetectClusterCIDR}, podCIDR, notLocal("! -s 10.244.0.0/16")},
		{"NodeCIDR", Config{MasqueradeBit: 14, ClusterCIDRs: cidrs, DetectLocal: DetectNodeCIDR}, podCIDR, notLocal("! -s 10.244.3.0/24")},
		{"NodeCIDR before the Node has one", Config{MasqueradeBit: 14, ClusterCIDRs: cidrs, DetectLocal: DetectNodeCIDR}, netip.Prefix{}, fromVIP},
		{"BridgeInterface", Config{MasqueradeBit: 14, DetectLocal: DetectBridgeInterface, LocalInterface: "cbr0"}, podCIDR, notLocal("! -i cbr0")},
		{"InterfaceNamePrefix", Config{MasqueradeBit: 14, DetectLocal: DetectInterfaceNamePrefix, LocalInterface: "veth"}, podCIDR, notLocal("! -i veth+")},
		{"other mark bit", Config{MasqueradeBit: 5}, podCIDR, "-A KUBE-MARK-MASQ -j MARK --or-mark 0x20"},
	} {
		t.Run(c.name, func(t *testing.T) {
			payload := string(gluePayload(&c.cfg, desired.IPv4, nil, Input{InUse: map[string]bool{desired.SetClusterIP: true}, PodCIDR: c.podCIDR}, blockedPlan{}))
			if !strings.Contains(payload, c.want+"\n") {
				t.Errorf("missing %q in\n%s", c.want, payload)
			}
			if strings.Count(payload, "KUBE-MARK-MASQ\n") != 2 { // KUBE-LOAD-BALANCER's and one KUBE-SERVICES rule
				t.Errorf("want exactly one masquerade rule in KUBE-SERVICES:\n%s", payload)
			}
		})
	}
}

// TestGlueSetRules: a rule that matches on a set is written while the set
// is in use, in upstream's order, and use says when the chains change.
func TestGlueSetRules(t *testing.T) {
	cfg := &Config{MasqueradeBit: 14}
	rulesOf := func(payload []byte, chain string) []string {
		var out []string
		nat, _, _ := strings.Cut(string(payload), "*filter")
		for _, l := range strings.Split(nat, "\n") {
			if strings.HasPrefix(l, "-A "+chain+" ") {
				out = append(out, l)
			}
		}
		return out
	}
	empty := gluePayload(cfg, desired.IPv4, nil, Input{}, blockedPlan{})
	if r := rulesOf(empty, "KUBE-NODE-PORT"); len(r) != 0 {
		t.Errorf("node port rules without node ports: %q", r)
	}
	if nat, _, _ := strings.Cut(string(empty), "*filter"); strings.Contains(nat, "--match-set KUBE-CLUSTER-IP") || strings.Contains(nat, "KUBE-LOOP-BACK") {
		t.Errorf("cluster IP or hairpin rules without entries:\n%s", nat)
	}
	full := gluePayload(cfg, desired.IPv4, nil, Input{InUse: map[string]bool{desired.SetNodePortTCP: true, desired.SetNodePortLocalTCP: true, desired.SetNodePortSCTP: true, desired.SetNodePortUDP: true}}, blockedPlan{})
	want := []string{
		`-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-TCP dst -j RETURN`,
		`-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ`,
		`-A KUBE-NODE-PORT -p udp -m comment --comment "Kubernetes nodeport UDP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-UDP dst -j KUBE-MARK-MASQ`,
		`-A KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'" -m set --match-set KUBE-NODE-PORT-SCTP-HASH dst,dst -j KUBE-MARK-MASQ`,
	}
	if got := rulesOf(full, "KUBE-NODE-PORT"); !slices.Equal(got, want) {
		t.Errorf("node port rules:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	ipt := &iptables.Fake{}
	g := &Glue{ipt: ipt, cfg: cfg}
	g.Guess(map[string]bool{desired.SetClusterIP: true})
	if _, _, err := g.Ensure(true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ipt.Payloads[0], "--match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT") {
		t.Errorf("the guess from the kernel's sets was not written:\n%s", ipt.Payloads[0])
	}
	if g.Use(Input{InUse: map[string]bool{desired.SetClusterIP: true}}) {
		t.Error("the sets guessed and written reported as a change")
	}
	if g.Use(Input{InUse: map[string]bool{desired.SetClusterIP: true, desired.SetLoopBack: false}}) {
		t.Error("a set listed as not in use reported as a change")
	}
	g.Guess(nil)
	if !g.Use(Input{InUse: map[string]bool{desired.SetClusterIP: true, desired.SetNodePortTCP: true}}) {
		t.Error("a set filled not reported")
	}
	if _, _, err := g.Ensure(true); err != nil {
		t.Fatal(err)
	}
	saved, _ := ipt.Save()
	if !strings.Contains(string(saved), "--match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ") {
		t.Errorf("node port rule not in the kernel:\n%s", saved)
	}
}

func TestGlueJumpsAreInsertedInUpstreamOrder(t *testing.T) {
	ipt := &iptables.Fake{}
	g := &Glue{ipt: ipt, cfg: &Config{MasqueradeBit: 14}}
	if _, _, err := g.Ensure(true); err != nil {
		t.Fatal(err)
	}
	// Within each built-in chain the jumps are in jumpRules' order.
	saved, _ := ipt.Save()
	var got, want []string
	for _, l := range strings.Split(string(saved), "\n") {
		if chain, _, _ := strings.Cut(strings.TrimPrefix(l, "-A "), " "); strings.HasPrefix(l, "-A ") && !strings.HasPrefix(chain, "KUBE-") {
			got = append(got, l)
		}
	}
	for _, table := range []string{"nat", "filter"} {
		for _, j := range jumpRules() {
			if j.table == table {
				want = append(want, "-A "+j.chain+" "+iptables.RuleSpec(j.rule))
			}
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("jumps after the first write:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Each jump goes to the top of its chain: INPUT, the chain with three,
	// shows they were inserted in reverse.
	var input, wantInput []string
	for _, l := range strings.Split(string(saved), "\n") {
		if strings.HasPrefix(l, "-A INPUT ") {
			input = append(input, l)
		}
	}
	for _, j := range jumpRules() {
		if j.chain == "INPUT" {
			wantInput = append(wantInput, "-A INPUT "+iptables.RuleSpec(j.rule))
		}
	}
	if !slices.Equal(input, wantInput) {
		t.Errorf("INPUT holds %q, want %q", input, wantInput)
	}
}

func TestGlueRestoresOnlyWhatDiffers(t *testing.T) {
	// iptables-save prints some rules otherwise than they were written;
	// the glue must not take that for drift.
	ipt := &iptables.Fake{Canonical: func(r string) string {
		mark, ok := strings.CutPrefix(r, "-j MARK --or-mark ")
		if !ok {
			return r
		}
		return "-j MARK --set-xmark " + mark + "/" + mark
	}}
	g := &Glue{ipt: ipt, cfg: &Config{MasqueradeBit: 14}}
	ensure := func(readBack bool, wantRestores int, wantDrifted bool) {
		t.Helper()
		drifted, _, err := g.Ensure(readBack)
		if err != nil {
			t.Fatal(err)
		}
		if len(ipt.Payloads) != wantRestores || drifted != wantDrifted {
			t.Fatalf("%d restores (drifted %v), want %d (%v)", len(ipt.Payloads), drifted, wantRestores, wantDrifted)
		}
	}
	ensure(false, 1, false) // the first write, not read back
	ensure(true, 2, false)  // so the next writes again, and reads it back
	saves := ipt.Saves
	ensure(true, 2, false) // nothing differs: one iptables-save, no restore
	if ipt.Saves != saves+1 {
		t.Fatalf("%d saves for a quiet check, want 1", ipt.Saves-saves)
	}

	// A rule removed from one of our chains, a rule added to another, and
	// a jump removed are each put right.
	for _, edit := range []string{
		"*nat\n-D KUBE-SERVICES -s 127.0.0.0/8 -j RETURN\nCOMMIT\n",
		"*filter\n-A KUBE-FORWARD -j DROP\nCOMMIT\n",
		"*filter\n-D INPUT " + iptables.RuleSpec(jumpRules()[3].rule) + "\nCOMMIT\n",
	} {
		before, _ := ipt.Save()
		if err := ipt.Restore([]byte(edit)); err != nil {
			t.Fatal(err)
		}
		edited, _ := ipt.Save()
		if string(edited) == string(before) {
			t.Fatalf("the edit %q changed nothing", edit)
		}
		restores := len(ipt.Payloads)
		ensure(true, restores+1, true)
		if after, _ := ipt.Save(); string(after) != string(before) {
			t.Fatalf("after %q the glue left\n%s\nwant\n%s", edit, after, before)
		}
		ensure(true, restores+1, false)
	}
}

// TestGlueSkipsIptablesWhileTheGenerationHolds: with a backend that counts
// its tables' changes (nft), a check that finds the chains as wanted is
// followed by checks that run no iptables at all until the tables change
// (anyone's commit) or what the chains depend on does.
func TestGlueSkipsIptablesWhileTheGenerationHolds(t *testing.T) {
	ipt := &iptables.Fake{Generations: true}
	g := New(ipt, desired.IPv4, Config{MasqueradeBit: 14})
	g.Use(Input{InUse: map[string]bool{desired.SetClusterIP: true}})
	ensure := func(wantSaves, wantRestores int, wantDrifted bool) {
		t.Helper()
		saves, restores := ipt.Saves, len(ipt.Payloads)
		drifted, _, err := g.Ensure(true)
		if err != nil {
			t.Fatal(err)
		}
		if ipt.Saves-saves != wantSaves || len(ipt.Payloads)-restores != wantRestores || drifted != wantDrifted {
			t.Fatalf("%d saves, %d restores (drifted %v); want %d, %d (%v)",
				ipt.Saves-saves, len(ipt.Payloads)-restores, drifted, wantSaves, wantRestores, wantDrifted)
		}
	}
	ensure(2, 1, false) // written and read back
	ensure(1, 0, false) // found as wanted
	ensure(0, 0, false) // nothing changed since
	ensure(0, 0, false)

	if err := ipt.Restore([]byte("*filter\n-A KUBE-FORWARD -j DROP\nCOMMIT\n")); err != nil {
		t.Fatal(err)
	}
	ensure(2, 1, true) // another program's commit: read, repaired, read back
	ensure(1, 0, false)
	ensure(0, 0, false)

	g.Use(Input{InUse: map[string]bool{desired.SetClusterIP: true, desired.SetExternalIP: true}})
	ensure(2, 1, false) // what we want changed
	ensure(1, 0, false)
	ensure(0, 0, false)

	plain := &iptables.Fake{}
	g = New(plain, desired.IPv4, Config{MasqueradeBit: 14})
	g.Use(Input{})
	for range 3 {
		if _, _, err := g.Ensure(true); err != nil {
			t.Fatal(err)
		}
	}
	if plain.Saves != 4 {
		t.Errorf("without a generation, three checks ran iptables-save %d times, want 4 (one a read-back)", plain.Saves)
	}
}

// TestGlueIPv6: the IPv6 chains match on the KUBE-6- sets alone, with
// IPv6's loopback range, reject type and cluster CIDR.
func TestGlueIPv6(t *testing.T) {
	cfg := &Config{MasqueradeBit: 14, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:244::/56")}}
	inUse := map[string]bool{}
	for _, s := range Sets() {
		inUse[s] = true
	}
	payload := string(gluePayload(cfg, desired.IPv6, nil, Input{InUse: inUse}, blockedPlan{}))
	for _, want := range []string{
		"-A KUBE-SERVICES -s ::1/128 -j RETURN",
		"--match-set KUBE-6-IPVS-IPS dst -j REJECT --reject-with icmp6-port-unreachable",
		"-A KUBE-SERVICES ! -s fd00:244::/56 ",
	} {
		if !strings.Contains(payload, want) {
			t.Errorf("IPv6 payload lacks %q", want)
		}
	}
	for _, l := range strings.Split(payload, "\n") {
		_, after, found := strings.Cut(l, "--match-set ")
		if found && !strings.HasPrefix(after, "KUBE-6-") || strings.Contains(l, "10.244.") || strings.Contains(l, "127.0.0.0") {
			t.Errorf("IPv4 in the IPv6 payload: %s", l)
		}
	}
}

// TestGlueLeftBehindCatchesUp: a sync's rewrite does not run iptables again
// after another goroutine's run failed (it would wait a second deadline);
// the chains are behind until a later write brings them in line.
func TestGlueLeftBehindCatchesUp(t *testing.T) {
	ipt := &iptables.Fake{}
	g := New(ipt, desired.IPv4, Config{MasqueradeBit: 14})
	g.Use(Input{InUse: map[string]bool{desired.SetClusterIP: true}})
	ipt.SetHook(oplog.FailWith(errors.New("iptables-save: killed at its deadline"), "save", "restore"))
	if _, _, err := g.Ensure(false); err == nil {
		t.Fatal("the injected failure was not returned")
	}
	g.Use(Input{InUse: map[string]bool{desired.SetClusterIP: true, desired.SetExternalIP: true}})
	saves := ipt.Saves
	if _, _, err := g.Rewrite(); !errors.Is(err, ErrFailing) || ipt.Saves != saves {
		t.Fatalf("rewrite after a failed run: %v, %d runs", err, ipt.Saves-saves)
	}
	if !g.Behind() {
		t.Fatal("chains not written, yet not behind")
	}
	ipt.SetHook(nil)
	if _, _, err := g.Ensure(false); err != nil || g.Behind() {
		t.Fatalf("the retry did not catch up: %v", err)
	}
	if c := ipt.Dump(); !strings.Contains(c, "--match-set KUBE-EXTERNAL-IP dst,dst -j KUBE-MARK-MASQ") {
		t.Errorf("chains:\n%s", c)
	}
	if _, _, err := g.Rewrite(); err != nil {
		t.Errorf("rewrite once iptables works: %v", err)
	}
}

// A set the kernel refused to create is matched by no rule, so that the
// rest of the chains can be restored; the filter of unanswered VIPs, which
// would reject the traffic of a set it cannot let through, waits for all
// of its sets. Every other rule stays.
func TestGlueLeavesOutTheRulesOfARefusedSet(t *testing.T) {
	cfg := &Config{MasqueradeBit: 14}
	all := map[string]bool{}
	for _, s := range desired.IPv4Sets {
		all[s.Name] = true
	}
	full := string(gluePayload(cfg, desired.IPv4, nil, Input{InUse: all}, blockedPlan{}))
	for _, s := range desired.IPv4Sets {
		if !strings.Contains(full, "--match-set "+s.Name+" ") {
			continue // no rule matches on it
		}
		payload := string(gluePayload(cfg, desired.IPv4, nil, Input{InUse: all, Missing: map[string]bool{s.Name: true}}, blockedPlan{}))
		if strings.Contains(payload, "--match-set "+s.Name+" ") {
			t.Errorf("%s refused, yet a rule matches on it:\n%s", s.Name, payload)
		}
		filters := strings.Contains(full, "-A KUBE-IPVS-FILTER -m set --match-set "+s.Name+" ") ||
			strings.Contains(full, "-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set "+s.Name+" ")
		if filters && strings.Contains(payload, "-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW") {
			t.Errorf("%s refused, yet the filter rejects:\n%s", s.Name, payload)
		}
		for _, l := range strings.Split(full, "\n") {
			if !strings.Contains(l, "--match-set "+s.Name+" ") && !(filters && strings.HasPrefix(l, "-A KUBE-IPVS-FILTER")) && !strings.Contains(payload, l+"\n") {
				t.Errorf("%s refused: the rule %q, which does not match on it, is gone", s.Name, l)
			}
		}
	}
}

// TestGlueRejectsUnansweredRoutedAddresses: with a Service CIDR routed
// locally, a new connection to any of its addresses that no set lets
// through is rejected, after the VIPs' own rule; without the sets' rules
// (a refused set), there is none, or it would reject Services' traffic.
func TestGlueRejectsUnansweredRoutedAddresses(t *testing.T) {
	routed := []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}
	rule := "-A KUBE-IPVS-FILTER -d 10.96.0.0/12 -m conntrack --ctstate NEW -j REJECT --reject-with icmp-port-unreachable"
	payload := string(gluePayload(&Config{MasqueradeBit: 14}, desired.IPv4, nil, Input{Routed: routed}, blockedPlan{}))
	vips := strings.Index(payload, "--match-set KUBE-IPVS-IPS dst -j REJECT")
	if at := strings.Index(payload, rule); at < 0 || at < vips {
		t.Errorf("no %q after the VIPs' reject:\n%s", rule, payload)
	}
	payload = string(gluePayload(&Config{MasqueradeBit: 14}, desired.IPv4, nil,
		Input{Routed: routed, Missing: map[string]bool{desired.SetClusterIP: true}}, blockedPlan{}))
	if strings.Contains(payload, rule) {
		t.Errorf("with KUBE-CLUSTER-IP refused, the routed CIDR is still rejected:\n%s", payload)
	}
}
