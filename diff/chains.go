package diff

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
)

// Chains reads the kernel's rules and keeps the last whole payload the
// proxier asks to restore. Compare then says where the kernel differs.
//
// iptables-save prints some rules otherwise than they are written (a MARK
// target, a negation), so rules are not compared as text: a chain differs
// when it is missing or holds another number of rules, a rule that hands
// packets to our chains or matches on one of our sets when none in its
// chain does.
type Chains struct {
	iptables.Interface
	Rows    *Rows
	Family  string // "IPv4" or "IPv6", for the rows
	mu      sync.Mutex
	payload []byte
}

func (c *Chains) Restore(payload []byte) error {
	if bytes.Contains(payload, []byte("\n:KUBE-SERVICES ")) {
		c.mu.Lock()
		c.payload = bytes.Clone(payload)
		c.mu.Unlock()
	}
	return nil
}

// Compare adds the rows of the chains' differences, from the kernel as it
// is now and the last whole payload.
func (c *Chains) Compare() error {
	c.mu.Lock()
	payload := c.payload
	c.mu.Unlock()
	if payload == nil {
		return nil
	}
	saved, err := c.Save()
	if err != nil {
		return err
	}
	want, have := parseRules(string(payload)), parseRules(string(saved))
	for _, chain := range want.order {
		object := c.Family + " " + chain
		w, h := want.rules[chain], have.rules[chain]
		switch {
		case !have.declared[chain] && want.declared[chain]:
			c.Rows.add(Row{Kind: KindChain, Change: Missing, Object: object})
			continue
		case want.declared[chain] && len(w) != len(h):
			c.Rows.add(Row{Kind: KindChain, Change: Wrong, Object: object,
				Want: fmt.Sprintf("%d rules", len(w)), Have: fmt.Sprintf("%d rules", len(h))})
		}
		for _, rule := range w {
			if m := matchOf(rule); m != "" && !anyHas(h, m) {
				c.Rows.add(Row{Kind: KindRule, Change: Missing, Object: object + " " + rule})
			}
		}
		if want.declared[chain] {
			for _, rule := range h {
				if m := matchOf(rule); m != "" && !anyHas(w, m) {
					c.Rows.add(Row{Kind: KindRule, Change: Extra, Object: object + " " + rule})
				}
			}
		}
	}
	return nil
}

// rules are the rules of a payload or a save, by "table/chain".
type rules struct {
	order    []string
	declared map[string]bool
	rules    map[string][]string
}

func parseRules(text string) rules {
	r := rules{declared: map[string]bool{}, rules: map[string][]string{}}
	table := ""
	note := func(chain string) {
		if _, ok := r.rules[chain]; !ok {
			r.rules[chain] = nil
			r.order = append(r.order, chain)
		}
	}
	for _, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":"):
			name, _, _ := strings.Cut(l[1:], " ")
			chain := table + "/" + name
			r.declared[chain] = true
			note(chain)
		case strings.HasPrefix(l, "-A "), strings.HasPrefix(l, "-I "):
			name, rule, _ := strings.Cut(l[3:], " ")
			if l[1] == 'I' { // "-I CHAIN 1 rule"
				_, rule, _ = strings.Cut(rule, " ")
			}
			chain := table + "/" + name
			note(chain)
			r.rules[chain] = append(r.rules[chain], rule)
		}
	}
	return r
}

// matchOf is what identifies a rule that ties the chains together: the
// set it matches on, or our chain it jumps to; "" for other rules.
func matchOf(rule string) string {
	if _, set, ok := strings.Cut(rule, "--match-set "); ok {
		name, _, _ := strings.Cut(set, " ")
		return "--match-set " + name + " "
	}
	if _, target, ok := strings.Cut(rule, "-j "); ok && strings.HasPrefix(target, "KUBE-") {
		name, _, _ := strings.Cut(target, " ")
		return "-j " + name + " "
	}
	return ""
}

func anyHas(rules []string, m string) bool {
	for _, r := range rules {
		if strings.Contains(r+" ", m) {
			return true
		}
	}
	return false
}
