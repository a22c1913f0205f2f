package proxier

import (
	"net/netip"
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
	if err := writeGlue(ipt, &Config{MasqueradeBit: 14}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, j := range jumpRules() {
		want = append(want, "-A "+j.chain+" "+iptables.RuleSpec(j.rule))
	}
	// Across tables the fake keeps one list; within each chain the order
	// is what matters, and the whole list follows jumpRules.
	saved, _ := ipt.Save()
	if got := strings.Split(strings.TrimSpace(string(saved)), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("jumps after the first write:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := writeGlue(ipt, &Config{MasqueradeBit: 14}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(ipt.Payloads[1], "\n-I "); n != 0 {
		t.Errorf("second write inserted %d jumps again:\n%s", n, ipt.Payloads[1])
	}
}
