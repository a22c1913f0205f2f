package iptables

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"sync"
)

// Interface is the part of iptables the proxier needs.
type Interface interface {
	// EnsureRule inserts rule at the top of table/chain unless an identical rule exists.
	EnsureRule(table, chain string, rule ...string) error
	// Restore applies an iptables-restore payload without flushing unnamed chains.
	Restore(payload []byte) error
}

// Exec runs the iptables binaries (iptables-nft or iptables-legacy, whichever
// the node's alternatives pick, as upstream kube-proxy's image does).
type Exec struct {
	IPTables, IPTablesRestore string
}

var _ Interface = Exec{}

// NewIPv4 finds iptables and iptables-restore on PATH.
func NewIPv4() (Exec, error) {
	ipt, err := exec.LookPath("iptables")
	if err != nil {
		return Exec{}, fmt.Errorf("iptables not found: %w", err)
	}
	restore, err := exec.LookPath("iptables-restore")
	if err != nil {
		return Exec{}, fmt.Errorf("iptables-restore not found: %w", err)
	}
	return Exec{IPTables: ipt, IPTablesRestore: restore}, nil
}

func (e Exec) EnsureRule(table, chain string, rule ...string) error {
	check := append([]string{"-w", "5", "-t", table, "-C", chain}, rule...)
	if err := exec.Command(e.IPTables, check...).Run(); err == nil {
		return nil
	}
	insert := append([]string{"-w", "5", "-t", table, "-I", chain}, rule...)
	if out, err := exec.Command(e.IPTables, insert...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(insert, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func (e Exec) Restore(payload []byte) error {
	cmd := exec.Command(e.IPTablesRestore, "-w", "5", "--noflush", "--counters")
	cmd.Stdin = bytes.NewReader(payload)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// Fake records what would have been written.
type Fake struct {
	mu       sync.Mutex
	Rules    []string
	Payloads []string
}

var _ Interface = (*Fake)(nil)

func (f *Fake) EnsureRule(table, chain string, rule ...string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := fmt.Sprintf("-t %s -A %s %s", table, chain, strings.Join(rule, " "))
	for _, have := range f.Rules {
		if have == r {
			return nil
		}
	}
	f.Rules = append(f.Rules, r)
	return nil
}

func (f *Fake) Restore(payload []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Payloads = append(f.Payloads, string(payload))
	return nil
}
