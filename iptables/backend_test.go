package iptables

import (
	"strings"
	"testing"
)

func TestChooseBackend(t *testing.T) {
	const hint = "*mangle\n:PREROUTING ACCEPT [0:0]\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n"
	rules := func(n int) string { return "*filter\n" + strings.Repeat("-A INPUT -j ACCEPT\n", n) + "COMMIT\n" }
	for _, tc := range []struct {
		name      string
		installed []string
		saves     map[string]string // binary and args → output
		want      string
	}{
		{"plain names: the alternatives choose", []string{"iptables-restore", "iptables-nft-restore", "iptables-legacy-restore"}, nil, ""},
		{"only nft", []string{"iptables-nft-restore"}, nil, "nft"},
		{"only legacy", []string{"iptables-legacy-restore"}, nil, "legacy"},
		{"kubelet's hint in legacy", []string{"iptables-nft-restore", "iptables-legacy-restore"},
			map[string]string{"ip6tables-legacy-save -t mangle": hint, "iptables-nft-save": rules(50)}, "legacy"},
		{"kubelet's hint in both: nft", []string{"iptables-nft-restore", "iptables-legacy-restore"},
			map[string]string{"iptables-legacy-save -t mangle": hint, "iptables-nft-save -t mangle": hint}, "nft"},
		{"no hint, more legacy rules", []string{"iptables-nft-restore", "iptables-legacy-restore"},
			map[string]string{"iptables-legacy-save": rules(3), "ip6tables-legacy-save": rules(2), "iptables-nft-save": rules(4)}, "legacy"},
		{"no hint, a tie: nft", []string{"iptables-nft-restore", "iptables-legacy-restore"},
			map[string]string{"iptables-legacy-save": rules(3), "iptables-nft-save": rules(3)}, "nft"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exists := func(bin string) bool {
				for _, b := range tc.installed {
					if b == bin {
						return true
					}
				}
				return false
			}
			save := func(bin string, args ...string) ([]byte, error) {
				return []byte(tc.saves[strings.Join(append([]string{bin}, args...), " ")]), nil
			}
			got, why := chooseBackend(exists, save)
			if got != tc.want || why == "" {
				t.Errorf("chose %q (%s), want %q", got, why, tc.want)
			}
		})
	}
}
