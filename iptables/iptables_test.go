package iptables

import "testing"

func TestRuleSpecQuotesLikeIptablesSave(t *testing.T) {
	got := RuleSpec([]string{"-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"})
	if want := `-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}
