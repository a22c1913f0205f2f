package iptables

import (
	"fmt"
	"os/exec"
	"regexp"
	"sync"
)

// iptables 1.8 drives one of two kernel APIs: nft, or the legacy xtables.
// Rules written through one are invisible to the other, so the proxier must
// use the one that holds the node's rules. On a host the plain names
// (iptables-restore) follow the node's alternatives. The image has no plain
// names, only iptables-nft-* and iptables-legacy-*, and the proxier picks
// between them at start-up the way upstream's images do (iptables-wrapper):
// the backend holding kubelet's hint chain in the mangle table, else the
// one with more rules, nft on a tie.

// chosen is the backend NewIPv4 and NewIPv6 use, chosen once per process.
var chosen = sync.OnceValues(func() (string, string) {
	return chooseBackend(func(bin string) bool { _, err := exec.LookPath(bin); return err == nil },
		func(bin string, args ...string) ([]byte, error) {
			return run(DefaultDeadline, nil, false, bin, args...)
		})
})

// Backend says which iptables binaries the proxier runs: "" for the plain
// names, else "nft" or "legacy", and why.
func Backend() (backend, why string) { return chosen() }

// kubeletHint matches the chains kubelet (1.17 on) creates in the mangle
// table of the backend it uses.
var kubeletHint = regexp.MustCompile(`(?m)^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY) `)

// ruleLine matches an iptables-save line that is a rule.
var ruleLine = regexp.MustCompile(`(?m)^-`)

// chooseBackend picks the backend, given which binaries exist and a way to
// run iptables-save.
func chooseBackend(exists func(bin string) bool, save func(bin string, args ...string) ([]byte, error)) (string, string) {
	if exists("iptables-restore") {
		return "", "iptables-restore is on PATH: the node's alternatives choose the backend"
	}
	nft, legacy := exists("iptables-nft-restore"), exists("iptables-legacy-restore")
	switch {
	case nft && !legacy:
		return "nft", "only iptables-nft is installed"
	case legacy && !nft:
		return "legacy", "only iptables-legacy is installed"
	case !nft && !legacy:
		return "", "no iptables-restore, iptables-nft-restore or iptables-legacy-restore on PATH"
	}
	both := func(mode string, args ...string) []byte {
		var out []byte
		for _, fam := range []string{"iptables", "ip6tables"} {
			b, _ := save(fam+"-"+mode+"-save", args...) // a family the kernel lacks has no rules
			out = append(out, b...)
		}
		return out
	}
	for _, mode := range []string{"nft", "legacy"} {
		if kubeletHint.Match(both(mode, "-t", "mangle")) {
			return mode, fmt.Sprintf("kubelet's hint chain is in the %s tables", mode)
		}
	}
	nftRules := len(ruleLine.FindAll(both("nft"), -1))
	legacyRules := len(ruleLine.FindAll(both("legacy"), -1))
	if legacyRules > nftRules {
		return "legacy", fmt.Sprintf("no kubelet hint chain; legacy holds more rules (%d) than nft (%d)", legacyRules, nftRules)
	}
	return "nft", fmt.Sprintf("no kubelet hint chain; nft holds as many rules or more (%d) than legacy (%d)", nftRules, legacyRules)
}

// binary is the name of an iptables program under the chosen backend:
// iptables-restore, or iptables-nft-restore.
func binary(family, cmd string) string {
	backend, _ := chosen()
	if backend == "" {
		return family + "-" + cmd
	}
	return family + "-" + backend + "-" + cmd
}
