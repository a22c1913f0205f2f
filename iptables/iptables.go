package iptables

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
)

// Interface is the part of iptables the proxier needs.
type Interface interface {
	// Restore applies an iptables-restore payload without flushing unnamed chains.
	Restore(payload []byte) error
	// Save returns iptables-save's output for every table.
	Save() ([]byte, error)
}

// RuleSpec renders a rule as iptables-save prints it after "-A CHAIN ".
func RuleSpec(rule []string) string {
	parts := make([]string, len(rule))
	for i, a := range rule {
		if strings.ContainsAny(a, " \t\"") {
			a = strconv.Quote(a)
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// Exec runs the iptables binaries (iptables-nft or iptables-legacy, whichever
// the node's alternatives pick, as upstream kube-proxy's image does).
type Exec struct {
	IPTables, IPTablesRestore, IPTablesSave string
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
	save, err := exec.LookPath("iptables-save")
	if err != nil {
		return Exec{}, fmt.Errorf("iptables-save not found: %w", err)
	}
	return Exec{IPTables: ipt, IPTablesRestore: restore, IPTablesSave: save}, nil
}

func (e Exec) Restore(payload []byte) error {
	cmd := exec.Command(e.IPTablesRestore, "-w", "5", "--noflush", "--counters")
	cmd.Stdin = bytes.NewReader(payload)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func (e Exec) Save() ([]byte, error) {
	out, err := exec.Command(e.IPTablesSave).Output()
	if err != nil {
		return nil, fmt.Errorf("iptables-save: %w", err)
	}
	return out, nil
}

// Fake records what would have been written. It models the built-in chains
// only: rules a payload inserts with "-I CHAIN 1" show in Save, at the top.
type Fake struct {
	mu       sync.Mutex
	Payloads []string
	tables   []string            // in order of first use
	saved    map[string][]string // per table
	// FailRestore, when set, is returned by Restore (as a failing
	// iptables-restore would).
	FailRestore error
}

var _ Interface = (*Fake)(nil)

// Save prints the inserted rules as iptables-save would, table by table
// (table markers omitted).
func (f *Fake) Save() ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, t := range f.tables {
		for _, r := range f.saved[t] {
			b.WriteString(r + "\n")
		}
	}
	return []byte(b.String()), nil
}

func (f *Fake) Restore(payload []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailRestore != nil {
		return f.FailRestore
	}
	f.Payloads = append(f.Payloads, string(payload))
	if f.saved == nil {
		f.saved = map[string][]string{}
	}
	table := ""
	for _, l := range strings.Split(string(payload), "\n") {
		if t, ok := strings.CutPrefix(l, "*"); ok {
			table = t
			if _, seen := f.saved[t]; !seen {
				f.tables = append(f.tables, t)
				f.saved[t] = nil
			}
		}
		if rest, ok := strings.CutPrefix(l, "-I "); ok {
			chain, spec, _ := strings.Cut(rest, " 1 ")
			f.saved[table] = append([]string{"-A " + chain + " " + spec}, f.saved[table]...)
		}
	}
	return nil
}
