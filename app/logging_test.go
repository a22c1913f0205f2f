package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"k8s.io/klog/v2"
)

// TestKlogGoesThroughOurLogger: client-go's lines (klog's global calls and
// the contextual logger its reflectors use) reach our logger with their
// fields, errors at Error, and only up to -v.
func TestKlogGoesThroughOurLogger(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	routeKlog(zap.New(core), 2)
	t.Cleanup(klog.ClearLogger)

	klog.InfoS("Caches populated", "type", "*v1.Service")
	klog.V(2).InfoS("Listing and watching", "type", "*v1.Node")
	klog.V(3).InfoS("not at -v 2")
	klog.FromContext(context.Background()).V(2).Info("Watch closed", "err", "too old resource version")
	klog.FromContext(context.Background()).V(4).Info("not at -v 2 either")
	klog.ErrorS(errors.New("connection refused"), "Failed to watch", "reflector", "services")
	klog.Flush()

	got := logs.All()
	want := []string{"Caches populated", "Listing and watching", "Watch closed", "Failed to watch"}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d: %v", len(got), len(want), got)
	}
	for i, e := range got {
		if e.Message != want[i] {
			t.Errorf("line %d: %q, want %q", i, e.Message, want[i])
		}
		if e.LoggerName != "client-go" {
			t.Errorf("line %d: logger %q, want client-go", i, e.LoggerName)
		}
	}
	if f := got[0].ContextMap(); f["type"] != "*v1.Service" {
		t.Errorf("fields of the first line: %v", f)
	}
	if f := got[2].ContextMap(); f["err"] != "too old resource version" || f["v"] != int64(2) {
		t.Errorf("fields of the contextual line: %v", f)
	}
	if last := got[3]; last.Level != zapcore.ErrorLevel || last.ContextMap()["error"] != "connection refused" {
		t.Errorf("error line: level %v, fields %v", last.Level, last.ContextMap())
	}
}

func TestZapFieldsKeepOddInput(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	zap.New(core).Info("x", zapFields([]any{"a", 1, 7, "b", "last"})...)
	f := logs.All()[0].ContextMap()
	if f["a"] != int64(1) || f["7"] != "b" || f["last"] != "(missing value)" {
		t.Errorf("fields: %v", f)
	}
}

// TestMain runs the command itself when a test re-executes this binary
// with KIP_RUN_MAIN=1, so that a test can read what the program writes.
func TestMain(m *testing.M) {
	if os.Getenv("KIP_RUN_MAIN") == "1" {
		if err := Command().Run(os.Args); err != nil {
			fmt.Fprintln(os.Stderr, "kube-ipvs-proxy:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestJSONLogToTheLastLine: with --logging-format=json, a start-up that
// fails once the logger exists ends with a JSON line too, and exit code 1.
func TestJSONLogToTheLastLine(t *testing.T) {
	cmd := exec.Command(os.Args[0], "--logging-format=json", "--hostname-override=n",
		"--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--oom-score-adj=0")
	cmd.Env = append(os.Environ(), "KIP_RUN_MAIN=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want code 1\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, l := range lines {
		var entry map[string]any
		if err := json.Unmarshal([]byte(l), &entry); err != nil {
			t.Errorf("not JSON: %q", l)
		}
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, `"level":"error"`) || !strings.Contains(last, "missing") {
		t.Errorf("last line %q: want the error that stopped it", last)
	}
}

// An unknown field of --config is named as soon as the file is read, even
// when the run ends before any client exists (--write-config-to, or a
// kubeconfig that fails).
func TestUnknownConfigFieldNamedAtOnce(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "config.yaml")
	body := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: ipvs\nipvs:\n  shceduler: rr\n"
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{
		{"--write-config-to", filepath.Join(dir, "out.yaml")},
		{"--kubeconfig", filepath.Join(dir, "missing")},
	} {
		cmd := exec.Command(os.Args[0], append([]string{"--config", conf, "--hostname-override=n", "--oom-score-adj=0"}, extra...)...)
		cmd.Env = append(os.Environ(), "KIP_RUN_MAIN=1")
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "ipvs.shceduler") {
			t.Errorf("%v: the unknown field is not named:\n%s", extra, out)
		}
	}
}
