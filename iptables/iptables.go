package iptables

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
)

// Interface is the part of iptables the proxier needs.
type Interface interface {
	// Restore applies an iptables-restore payload without flushing unnamed chains.
	Restore(payload []byte) error
	// Save returns iptables-save's output for every table.
	Save() ([]byte, error)
}

// WriteRemoval appends to b one table's iptables-restore input that removes
// rules (given as iptables-save prints them, "-A CHAIN ...") and then
// chains; nothing when there is neither. The rules go first, since a chain
// cannot go while a rule jumps to it.
func WriteRemoval(b *strings.Builder, table string, rules, chains []string) {
	if len(rules)+len(chains) == 0 {
		return
	}
	fmt.Fprintf(b, "*%s\n", table)
	for _, r := range rules {
		b.WriteString("-D " + strings.TrimPrefix(r, "-A ") + "\n")
	}
	for _, c := range chains {
		fmt.Fprintf(b, ":%s - [0:0]\n", c)
	}
	for _, c := range chains {
		fmt.Fprintf(b, "-X %s\n", c)
	}
	b.WriteString("COMMIT\n")
}

// JumpTarget is the chain a rule's -j or -g names, given the rule's fields
// as iptables-save prints them; "" for none.
func JumpTarget(fields []string) string {
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "-j" || fields[i] == "-g" {
			return fields[i+1]
		}
	}
	return ""
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

// Exec runs the iptables binaries of the chosen backend (backend.go).
// Only the restore and save binaries are used.
//
// Each run has a deadline, and is killed with its children once the deadline
// passes: a hung iptables-restore or iptables-save must not stall the
// proxier, which retries its chains with backoff.
type Exec struct {
	IPTablesRestore, IPTablesSave string
	// NFT says the binaries drive the nft backend, whose generation tells
	// when any table changed (Generation).
	NFT bool
	// Deadline bounds iptables-save, and iptables-restore before
	// PerLine's share; zero means DefaultDeadline.
	Deadline time.Duration
	// PerLine is added to a restore's deadline for each payload line;
	// zero means DefaultPerLine.
	PerLine time.Duration
	// MaxDeadline caps a restore's deadline, whatever its size; zero
	// means DefaultMaxDeadline.
	MaxDeadline time.Duration
}

const (
	// DefaultDeadline is three times the 5 s a restore waits for the
	// xtables lock (-w 5): a restore that waited all of it still has twice
	// that to run, and one takes ~0.15 s in the test VM.
	DefaultDeadline = 15 * time.Second
	// DefaultPerLine allows for rules that are slow to parse: at 10k
	// Services a KUBE-IPVS-OUT-FILTER rule takes ~60 ms (proxier/blocked.go).
	DefaultPerLine = 100 * time.Millisecond
	// DefaultMaxDeadline caps that growth: a restore still running after
	// five minutes holds the xtables lock from every other writer on the
	// node, and is better killed and retried with backoff (the slowest
	// seen, 500 filter rules at 10k Services, took 56 s).
	DefaultMaxDeadline = 5 * time.Minute
	// waitDelay bounds the wait for the output pipes once the process is
	// gone (exited or killed), should a child left behind hold them.
	waitDelay = time.Second
)

var _ Interface = Exec{}

// NewIPv4 finds iptables-restore and iptables-save, of the chosen backend,
// on PATH.
func NewIPv4() (Exec, error) { return newExec("iptables") }

// NewIPv6 finds ip6tables-restore and ip6tables-save, of the chosen
// backend, on PATH.
func NewIPv6() (Exec, error) { return newExec("ip6tables") }

func newExec(family string) (Exec, error) {
	var e Exec
	for _, b := range []struct {
		cmd string
		to  *string
	}{{"restore", &e.IPTablesRestore}, {"save", &e.IPTablesSave}} {
		name := binary(family, b.cmd)
		p, err := exec.LookPath(name)
		if err != nil {
			_, why := Backend()
			return Exec{}, fmt.Errorf("%s not found (%s): %w", name, why, err)
		}
		*b.to = p
	}
	e.NFT = drivesNFT(e.IPTablesSave)
	return e, nil
}

func (e Exec) Restore(payload []byte) error {
	deadline := cmp.Or(e.Deadline, DefaultDeadline) + time.Duration(bytes.Count(payload, []byte("\n")))*cmp.Or(e.PerLine, DefaultPerLine)
	deadline = min(deadline, cmp.Or(e.MaxDeadline, DefaultMaxDeadline))
	out, err := run(deadline, payload, true, e.IPTablesRestore, "-w", "5", "--noflush", "--counters")
	if err != nil {
		return fmt.Errorf("iptables-restore: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func (e Exec) Save() ([]byte, error) {
	out, err := run(cmp.Or(e.Deadline, DefaultDeadline), nil, false, e.IPTablesSave)
	if err != nil {
		return nil, fmt.Errorf("iptables-save: %w", err)
	}
	return out, nil
}

// run runs bin in a process group of its own, so that the kill at the
// deadline also ends a child it started (iptables may run modprobe).
// It returns stdout, with stderr too if combined; without, stderr is put
// in the error.
func run(deadline time.Duration, stdin []byte, combined bool, bin string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = waitDelay
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if combined {
		cmd.Stderr = &out
	}
	err := cmd.Run()
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("killed at its %s deadline: %w", deadline, ctx.Err())
	}
	if err != nil && !combined {
		err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out.Bytes(), err
}

// Fake is an in-memory iptables for unit tests. It models what the proxier
// relies on: iptables-restore --noflush (":CHAIN" creates a user chain or
// flushes it, "-A", "-I CHAIN N" and "-D" edit it) and iptables-save printing
// every table it has seen, chain by chain.
type Fake struct {
	mu       sync.Mutex
	Payloads []string
	// Saves counts calls to Save.
	Saves int
	// Generations makes Generation tell the count of restores, gen, as the
	// nft backend's generation tells commits.
	Generations bool
	gen         uint32
	tables      []*fakeTable // in order of first use
	// Canonical, when set, rewrites each rule as it is stored, the way
	// iptables-save prints some rules differently from how they were
	// written (e.g. "--or-mark 0x4000" as "--set-xmark 0x4000/0x4000").
	Canonical func(rule string) string
	ops       oplog.Log
}

// SetHook makes h see each run begin ("save", "restore"), as the kernel
// fakes' hooks do (see oplog.Hook): its error fails the run, and it may
// block, as a hung process does. nil removes it.
func (f *Fake) SetHook(h oplog.Hook) { f.ops.SetHook(h) }

type fakeTable struct {
	name   string
	chains []string // in order of creation
	rules  map[string][]string
}

var _ Interface = (*Fake)(nil)

func (f *Fake) Save() ([]byte, error) {
	f.mu.Lock()
	f.Saves++
	f.mu.Unlock()
	if _, err := f.ops.Begin("save"); err != nil {
		return nil, err
	}
	return []byte(f.Dump()), nil
}

// Dump prints the tables as iptables-save does, without a run: no hook
// sees it, and Saves does not count it.
func (f *Fake) Dump() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	for _, t := range f.tables {
		fmt.Fprintf(&b, "*%s\n", t.name)
		for _, c := range t.chains {
			policy := "-"
			if isBuiltin(c) {
				policy = "ACCEPT"
			}
			fmt.Fprintf(&b, ":%s %s [0:0]\n", c, policy)
		}
		for _, c := range t.chains {
			for _, r := range t.rules[c] {
				fmt.Fprintf(&b, "-A %s %s\n", c, r)
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

func isBuiltin(chain string) bool {
	switch chain {
	case "PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING":
		return true
	}
	return false
}

// Restore applies a payload as iptables-restore --noflush does: whole or
// not at all. A declared chain is created or flushed; a rule may go only
// to a chain that exists, a built-in one or one declared; deleting a rule
// that is not there fails the payload. It does not check rules' syntax.
func (f *Fake) Restore(payload []byte) error {
	if _, err := f.ops.Begin("restore"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Payloads = append(f.Payloads, string(payload))
	tables := make([]*fakeTable, len(f.tables))
	for i, t := range f.tables {
		tables[i] = t.clone()
	}
	var t *fakeTable
	for n, l := range strings.Split(string(payload), "\n") {
		fail := func(why string) error { return fmt.Errorf("iptables-restore: line %d failed (%s): %s", n+1, why, l) }
		if name, ok := strings.CutPrefix(l, "*"); ok {
			t = tableNamed(&tables, name)
			continue
		}
		if t == nil {
			continue
		}
		switch {
		case strings.HasPrefix(l, ":"):
			chain, _, _ := strings.Cut(l[1:], " ")
			t.ensure(chain)
			if !isBuiltin(chain) {
				t.rules[chain] = nil
			}
		case strings.HasPrefix(l, "-A "):
			chain, spec, _ := strings.Cut(l[3:], " ")
			if !t.has(chain) {
				return fail("no chain " + chain)
			}
			t.rules[chain] = append(t.rules[chain], f.canonical(spec))
		case strings.HasPrefix(l, "-I "):
			chain, spec, _ := strings.Cut(l[3:], " ")
			if !t.has(chain) {
				return fail("no chain " + chain)
			}
			at := 1
			if n, rest, _ := strings.Cut(spec, " "); n != "" {
				if i, err := strconv.Atoi(n); err == nil {
					at, spec = i, rest
				}
			}
			at = min(max(at, 1), len(t.rules[chain])+1)
			t.rules[chain] = slices.Insert(t.rules[chain], at-1, f.canonical(spec))
		case strings.HasPrefix(l, "-D "):
			chain, spec, _ := strings.Cut(l[3:], " ")
			i := slices.Index(t.rules[chain], f.canonical(spec))
			if i < 0 {
				return fail("no such rule")
			}
			t.rules[chain] = slices.Delete(t.rules[chain], i, i+1)
		}
	}
	f.tables = tables
	f.gen++
	return nil
}

func (f *Fake) canonical(rule string) string {
	if f.Canonical == nil {
		return rule
	}
	return f.Canonical(rule)
}

// tableNamed finds a table in tables, adding it if missing.
func tableNamed(tables *[]*fakeTable, name string) *fakeTable {
	for _, t := range *tables {
		if t.name == name {
			return t
		}
	}
	t := &fakeTable{name: name, rules: map[string][]string{}}
	*tables = append(*tables, t)
	return t
}

// has says whether chain exists: a built-in one is there from the start.
func (t *fakeTable) has(chain string) bool {
	if isBuiltin(chain) {
		t.ensure(chain)
	}
	return slices.Contains(t.chains, chain)
}

func (t *fakeTable) clone() *fakeTable {
	c := &fakeTable{name: t.name, chains: slices.Clone(t.chains), rules: make(map[string][]string, len(t.rules))}
	for k, v := range t.rules {
		c.rules[k] = slices.Clone(v)
	}
	return c
}

func (t *fakeTable) ensure(chain string) {
	if !slices.Contains(t.chains, chain) {
		t.chains = append(t.chains, chain)
	}
}
