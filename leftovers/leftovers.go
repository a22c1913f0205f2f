// Package leftovers removes what kube-proxy's iptables and nftables modes
// leave on a node that switched to IPVS. Their chains and tables keep
// matching packets until removed: a REJECT written while a Service had no
// endpoints would refuse it for good. Upstream's own `kube-proxy --cleanup`
// cannot do this job after the switch: it also flushes the whole IPVS table
// and deletes kube-ipvs0.
//
// The removal runs after our first sync, so that the other mode's rules
// answer until ours are in place (docs/migration.md).
package leftovers

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
)

// IPTablesModeChain says whether chain, in table, belongs to kube-proxy's
// iptables mode alone: no chain IPVS mode uses has one of these names.
func IPTablesModeChain(table, chain string) bool {
	switch table {
	case "nat":
		for _, prefix := range []string{"KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-"} {
			if strings.HasPrefix(chain, prefix) {
				return true
			}
		}
		return chain == "KUBE-NODEPORTS" || chain == "KUBE-PROXY-CANARY"
	case "filter":
		return slices.Contains([]string{"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-NODEPORTS", "KUBE-PROXY-CANARY"}, chain)
	case "mangle":
		return chain == "KUBE-PROXY-CANARY"
	}
	return false
}

// SharedWithIPTablesMode says whether chain, one of IPVS mode's, is also
// one of iptables mode's: after a switch either way it holds the rules of
// whichever mode wrote it last.
func SharedWithIPTablesMode(table, chain string) bool {
	switch table {
	case "nat":
		return slices.Contains([]string{"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"}, chain)
	case "filter":
		return slices.Contains([]string{"KUBE-FORWARD", "KUBE-PROXY-FIREWALL"}, chain)
	}
	return false
}

// firewallJumpComment marks iptables mode's jumps to KUBE-PROXY-FIREWALL, a
// chain both modes use; IPVS mode's own jumps carry another comment.
const firewallJumpComment = `"kubernetes load balancer firewall"`

// NotYet is iptablesPayload's answer while one of our chains still jumps
// to an iptables mode chain: our first write of it has not happened, and
// removing the chain now would cut the traffic it carries.
type NotYet struct{ Table, Chain, Target string }

func (e NotYet) Error() string {
	return fmt.Sprintf("%s chain %s still jumps to %s: ours are not written yet", e.Table, e.Chain, e.Target)
}

// IPTablesMode is what one family's iptables-save output holds of
// kube-proxy's iptables mode: any of its chains (left), and whether a chain
// we share with it still jumps to one of its own, so that its rules still
// dispatch Services there (answers).
func IPTablesMode(saved []byte) (left, answers bool) {
	payload, _, err := iptablesPayload(string(saved))
	answers = errors.As(err, new(NotYet))
	return answers || payload != nil, answers
}

// iptablesPayload is the iptables-restore input that removes, from one
// family's iptables-save output, iptables mode's chains and every rule that
// jumps to them, and how many chains that is; nil when there is none.
func iptablesPayload(saved string) (payload []byte, chains int, err error) {
	var b strings.Builder
	table := ""
	var deletes, gone []string
	for _, line := range strings.Split(saved, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			table, deletes, gone = line[1:], nil, nil
		case strings.HasPrefix(line, ":"):
			if chain, _, _ := strings.Cut(line[1:], " "); IPTablesModeChain(table, chain) {
				gone = append(gone, chain)
			}
		case strings.HasPrefix(line, "-A "):
			f := strings.Fields(line)
			if len(f) < 2 {
				continue // not iptables-save's; nothing to delete
			}
			chain, target := f[1], iptables.JumpTarget(f)
			if IPTablesModeChain(table, chain) {
				continue // flushed with its chain
			}
			firewallJump := target == "KUBE-PROXY-FIREWALL" && strings.Contains(line, firewallJumpComment)
			if !IPTablesModeChain(table, target) && !firewallJump {
				continue
			}
			if slices.Contains(glue.Chains[table], chain) {
				return nil, 0, NotYet{table, chain, target}
			}
			deletes = append(deletes, line)
		case line == "COMMIT":
			iptables.WriteRemoval(&b, table, deletes, gone)
			chains += len(gone)
		}
	}
	if b.Len() == 0 {
		return nil, 0, nil
	}
	return []byte(b.String()), chains, nil
}

// NFTables deletes a table of nftables.
type NFTables interface {
	// DeleteTable deletes table name of family "ip" or "ip6", and says
	// whether it was there.
	DeleteTable(family, name string) (bool, error)
}

// nftablesModeTable is the table kube-proxy's nftables mode keeps all of
// its state in, in each IP family.
const nftablesModeTable = "kube-proxy"

// Remove removes iptables mode's chains through each family's ipts, and
// nftables mode's tables through nft (nil to skip them). It returns a
// NotYet error, having removed nothing of that family, while our chains
// are not yet in place there; the caller tries again later.
func Remove(log *zap.Logger, ipts []iptables.Interface, nft NFTables) error {
	for _, ipt := range ipts {
		saved, err := ipt.Save()
		if err != nil {
			return err
		}
		payload, chains, err := iptablesPayload(string(saved))
		if err != nil {
			return err
		}
		if payload == nil {
			continue
		}
		if err := ipt.Restore(payload); err != nil {
			return fmt.Errorf("remove kube-proxy iptables mode's chains: %w", err)
		}
		log.Info("removed kube-proxy iptables mode's leftover chains and the rules jumping to them", zap.Int("chains", chains))
	}
	if nft == nil {
		return nil
	}
	for _, family := range []string{"ip", "ip6"} {
		there, err := nft.DeleteTable(family, nftablesModeTable)
		if err != nil {
			return fmt.Errorf("remove kube-proxy nftables mode's table %s %s: %w", family, nftablesModeTable, err)
		}
		if there {
			log.Info("removed kube-proxy nftables mode's leftover table", zap.String("family", family), zap.String("table", nftablesModeTable))
		}
	}
	return nil
}
