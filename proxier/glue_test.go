package proxier

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
)

func TestGlueMasqueradeRules(t *testing.T) {
	const masq = `-m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP`
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"default", Config{MasqueradeBit: 14}, "-A KUBE-SERVICES " + masq + " src,dst -j KUBE-MARK-MASQ"},
		{"masquerade-all", Config{MasqueradeBit: 14, MasqueradeAll: true}, "-A KUBE-SERVICES " + masq + " dst,dst -j KUBE-MARK-MASQ"},
		{"cluster-cidr", Config{MasqueradeBit: 14, ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
			"-A KUBE-SERVICES ! -s 10.244.0.0/16 " + masq + " dst,dst -j KUBE-MARK-MASQ"},
		{"other mark bit", Config{MasqueradeBit: 5}, "-A KUBE-MARK-MASQ -j MARK --or-mark 0x20"},
	} {
		t.Run(c.name, func(t *testing.T) {
			payload := string(gluePayload(&c.cfg, nil))
			if !strings.Contains(payload, c.want+"\n") {
				t.Errorf("missing %q in\n%s", c.want, payload)
			}
			if strings.Count(payload, "KUBE-MARK-MASQ\n") != 2 { // KUBE-LOAD-BALANCER's and one KUBE-SERVICES rule
				t.Errorf("want exactly one masquerade rule in KUBE-SERVICES:\n%s", payload)
			}
		})
	}
}

func TestGlueJumpsAreInsertedInUpstreamOrder(t *testing.T) {
	ipt := &iptables.Fake{}
	g := &glue{ipt: ipt, cfg: &Config{MasqueradeBit: 14}}
	if _, err := g.ensure(true); err != nil {
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
	g := &glue{ipt: ipt, cfg: &Config{MasqueradeBit: 14}}
	ensure := func(readBack bool, wantRestores int, wantDrifted bool) {
		t.Helper()
		drifted, err := g.ensure(readBack)
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
