package iptables

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRuleSpecQuotesLikeIptablesSave(t *testing.T) {
	got := RuleSpec([]string{"-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"})
	if want := `-m comment --comment "kubernetes service portals" -j KUBE-SERVICES`; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
}

// fakeBinary writes an executable shell script to a temporary directory.
func fakeBinary(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-iptables")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// A hung iptables-restore or iptables-save is killed at its deadline, with
// the child it started (which holds its output pipe), so that the proxier
// can go on and retry.
func TestExecKillsAHungRunAndItsChildAtTheDeadline(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(Exec) error
	}{
		{"restore", func(e Exec) error { return e.Restore(nil) }},
		{"save", func(e Exec) error { _, err := e.Save(); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "child")
			bin := fakeBinary(t, fmt.Sprintf("sleep 60 &\necho $! >%s\nwait\n", pidFile))
			// The deadline leaves a loaded machine time to start the
			// script and its child (200 ms did not, under a VM's load).
			e := Exec{IPTablesRestore: bin, IPTablesSave: bin, Deadline: 2 * time.Second}
			errc := make(chan error, 1)
			go func() { errc <- tc.run(e) }()
			var err error
			select {
			case err = <-errc:
			case <-time.After(10 * time.Second):
				t.Fatal("still waiting for the hung run long after its deadline")
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("error %v, want one that says the deadline passed", err)
			}
			data, readErr := os.ReadFile(pidFile)
			pid, convErr := strconv.Atoi(strings.TrimSpace(string(data)))
			if readErr != nil || convErr != nil {
				t.Fatalf("child's pid: %v %v", readErr, convErr)
			}
			// The kill is asynchronous to us: the child is gone, or a zombie
			// its killed parent left to init, within moments.
			for end := time.Now().Add(5 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(end) {
					_ = syscall.Kill(pid, syscall.SIGKILL)
					t.Fatal("the hung run's child outlived the kill")
				}
			}
		})
	}
}

// alive says whether pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func TestExecReportsWhatAFailedRunSaid(t *testing.T) {
	bin := fakeBinary(t, "cat >/dev/null\necho 'line 2 failed' >&2\nexit 1\n")
	e := Exec{IPTablesRestore: bin, IPTablesSave: bin}
	if err := e.Restore([]byte("*filter\nCOMMIT\n")); err == nil || !strings.Contains(err.Error(), "line 2 failed") ||
		errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("restore: %v", err)
	}
	if _, err := e.Save(); err == nil || !strings.Contains(err.Error(), "line 2 failed") {
		t.Errorf("save: %v", err)
	}
	ok := Exec{IPTablesRestore: fakeBinary(t, "cat\n"), IPTablesSave: fakeBinary(t, "echo '*nat'\n")}
	if err := ok.Restore([]byte("*nat\nCOMMIT\n")); err != nil {
		t.Errorf("restore: %v", err)
	}
	if out, err := ok.Save(); err != nil || string(out) != "*nat\n" {
		t.Errorf("save: %q %v", out, err)
	}
}

// A restore's deadline grows with its payload: at scale some rules take
// tens of milliseconds each to parse, and a long restore that is not hung
// must not be killed and retried forever.
func TestExecRestoreDeadlineGrowsWithThePayload(t *testing.T) {
	bin := fakeBinary(t, "cat >/dev/null\nsleep 0.5\n")
	e := Exec{IPTablesRestore: bin, Deadline: 100 * time.Millisecond, PerLine: 100 * time.Millisecond}
	if err := e.Restore([]byte(strings.Repeat("-A X -j ACCEPT\n", 20))); err != nil {
		t.Errorf("a 20-line restore of 0.5 s was not given its 2.1 s: %v", err)
	}
}

// That growth has a cap: a restore past it is killed, however long its
// payload, so that no run holds the xtables lock without end.
func TestExecRestoreDeadlineHasACap(t *testing.T) {
	bin := fakeBinary(t, "cat >/dev/null\nsleep 1\n")
	e := Exec{IPTablesRestore: bin, Deadline: 100 * time.Millisecond, PerLine: 100 * time.Millisecond, MaxDeadline: 300 * time.Millisecond}
	start := time.Now()
	if err := e.Restore([]byte(strings.Repeat("-A X -j ACCEPT\n", 20))); err == nil {
		t.Errorf("a 1 s restore finished under a 300 ms cap (%s)", time.Since(start))
	}
}
