package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
	if last := lines[len(lines)-1]; !strings.Contains(last, `"err":`) || strings.Contains(last, `"v":`) || !strings.Contains(last, "missing") {
		t.Errorf("last line %q: want the error that stopped it, as an error line (err, no v)", last)
	}
}

// runMain runs the command in a child process with args and returns what
// it wrote to stderr, split into lines.
func runMain(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "KIP_RUN_MAIN=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	_ = cmd.Run()
	return strings.Split(strings.TrimSpace(stderr.String()), "\n")
}

// The expressions log pipelines use for kube-proxy's klog text lines: the
// header (fluent-bit's and Vector's klog parsers split it the same way),
// then klog's structured form: a quoted message and key=value pairs, a
// value quoted unless it is a number, a boolean or null.
var (
	klogHeader = regexp.MustCompile(`^([IWEF])(\d{2})(\d{2}) (\d{2}:\d{2}:\d{2}\.\d{6}) +(\d+) ([^ :\]]+):(\d+)\] (.*)$`)
	klogBody   = regexp.MustCompile(`^"((?:[^"\\]|\\.)*)"((?: [A-Za-z0-9_.-]+=(?:"(?:[^"\\]|\\.)*"|[^ "]+))*)$`)
	klogPair   = regexp.MustCompile(` ([A-Za-z0-9_.-]+)=("(?:[^"\\]|\\.)*"|[^ "]+)`)
)

// --logging-format=text (the default) writes klog's lines: every line of
// a start that fails parses as kube-proxy's do, info as I and the error
// that stopped it as E with the reason under err.
func TestTextLogIsKlogs(t *testing.T) {
	lines := runMain(t, "--hostname-override=n", "--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--oom-score-adj=0")
	for _, l := range lines {
		h := klogHeader.FindStringSubmatch(l)
		if h == nil {
			t.Fatalf("not a klog header: %q", l)
		}
		if pid, _ := strconv.Atoi(h[5]); pid <= 0 || !strings.HasSuffix(h[6], ".go") {
			t.Errorf("pid %q, file %q in %q", h[5], h[6], l)
		}
		if klogBody.FindStringSubmatch(h[8]) == nil {
			t.Errorf("not klog's structured form: %q", h[8])
		}
	}
	first := klogHeader.FindStringSubmatch(lines[0])
	last := klogHeader.FindStringSubmatch(lines[len(lines)-1])
	if first[1] != "I" || !strings.HasPrefix(first[8], `"kube-ipvs-proxy" version=`) {
		t.Errorf("first line %q: want the version, at I", lines[0])
	}
	pairs := map[string]string{}
	for _, m := range klogPair.FindAllStringSubmatch(last[8], -1) {
		pairs[m[1]] = m[2]
	}
	if last[1] != "E" || !strings.Contains(pairs["err"], "missing") {
		t.Errorf("last line %q: want the error that stopped it, at E, under err", lines[len(lines)-1])
	}
}

// --logging-format=json writes component-base's JSON lines: ts (ms since
// the epoch), caller, msg; info lines with their verbosity v; errors
// with err and no v.
func TestJSONLogIsComponentBases(t *testing.T) {
	lines := runMain(t, "--logging-format=json", "-v=4", "--hostname-override=n",
		"--kubeconfig", filepath.Join(t.TempDir(), "missing"), "--oom-score-adj=0")
	for i, l := range lines {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		ts, _ := e["ts"].(float64)
		caller, _ := e["caller"].(string)
		if ts < 1e12 || !regexp.MustCompile(`^[\w./-]+\.go:\d+$`).MatchString(caller) || e["msg"] == nil {
			t.Errorf("line %q: want ts in ms, caller file:line, msg", l)
		}
		_, hasV := e["v"]
		_, hasErr := e["err"]
		if i == len(lines)-1 {
			if hasV || !hasErr {
				t.Errorf("last line %q: want an error line, err and no v", l)
			}
		} else if v, ok := e["v"].(float64); !ok || v != 0 && v != 4 {
			t.Errorf("line %q: want v 0 or 4", l)
		}
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

// --vmodule, as klog's: the per-sync (Debug, verbosity 4) lines of the
// files a pattern names follow that pattern's N instead of -v.
func TestVModuleSetsAFilesVerbosity(t *testing.T) {
	for _, tc := range []struct {
		vmodule string
		v       int
		want    bool // this file's Debug line written
	}{
		{"", 0, false},
		{"", 4, true},
		{"logging_test=4", 0, true},
		{"logg*=5", 0, true},
		{"app/logging_test=4", 0, true},
		{"proxier=4", 0, false},
		{"logging_test=2", 4, false}, // the file's N wins over -v
		{"other/logging_test=4", 0, false},
	} {
		m, err := parseVModule(tc.vmodule)
		if err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zapcore.DebugLevel)
		log := zap.New(vmoduleCore{core, m, tc.v}, zap.AddCaller())
		log.Debug("a sync's details")
		if got := logs.Len() == 1; got != tc.want {
			t.Errorf("--vmodule=%q -v=%d: Debug line written %v, want %v", tc.vmodule, tc.v, got, tc.want)
		}
	}
	for _, bad := range []string{"proxier", "proxier=x", "proxier=-1", "[=4", "=4"} {
		if _, err := parseVModule(bad); err == nil {
			t.Errorf("--vmodule=%q accepted", bad)
		}
	}
}
