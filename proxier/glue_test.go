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
			payload := string(gluePayload(&c.cfg))
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
	// The fake appends; writeGlue inserts at the top from the last rule up,
	// so the fake's record must be the list reversed.
	rules := jumpRules()
	if len(ipt.Rules) != len(rules) || !strings.Contains(ipt.Rules[0], "KUBE-IPVS-OUT-FILTER") ||
		!strings.Contains(ipt.Rules[len(ipt.Rules)-1], "PREROUTING") {
		t.Fatalf("jump rules written in the wrong order: %q", ipt.Rules)
	}
	if err := writeGlue(ipt, &Config{MasqueradeBit: 14}); err != nil || len(ipt.Rules) != len(rules) {
		t.Fatalf("second write duplicated jumps: %q", ipt.Rules)
	}
}
