//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/diff"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/view"
)

// runDiff runs `kube-ipvs-proxy diff` with the proxier's flags and returns
// its output and exit code.
func runDiff(t *testing.T, extra ...string) (string, int) {
	t.Helper()
	return runOurs(t, "diff", extra...)
}

// runOurs runs a command of kube-ipvs-proxy (diff, status) with the
// proxier's flags and returns its output and exit code.
func runOurs(t *testing.T, command string, extra ...string) (string, int) {
	t.Helper()
	args := append([]string{command}, framework.OursArgs(env, proxierFlags...)...)
	cmd := exec.Command(filepath.Join(env.Bin, "kube-ipvs-proxy"), append(args, extra...)...)
	out, err := cmd.Output()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		if len(exit.Stderr) > 0 {
			t.Logf("%s: stderr:\n%s", command, exit.Stderr)
		}
		return string(out), exit.ExitCode()
	}
	t.Fatalf("%s: %v", command, err)
	return "", 0
}

// TestDiffShowsDriftUntilRepaired: `kube-ipvs-proxy diff`, given the
// proxier's flags, finds a synced node equal (exit 0). With the proxier
// stopped, a real server deleted, an address added and a set entry deleted
// behind its back show as rows (exit 1), in a table and as JSON, and stay:
// diff writes nothing. The proxier's next check repairs them, and diff is
// back to exit 0. Serial: it stops the shared proxier.
func TestDiffShowsDriftUntilRepaired(t *testing.T) {
	ourProxier(t)
	const ns = "diff"
	mustNamespace(t, ns)
	a := mustPod(t, "diff-a", "10.244.61.1", true)
	b := mustPod(t, "diff-b", "10.244.61.2", true)
	client := mustPod(t, "diff-client", "10.244.61.100", false)
	svc, slice := webService(ns, "10.96.61.10", a, b)
	mustApply(t, svc, slice)
	vip := ap("10.96.61.10:80")
	waitAnswerSet(t, client.HTTP, vip, "diff-a,diff-b", 6, 30*time.Second)
	eventually(t, "diff of a synced node exits 0", 30*time.Second, func() error {
		if out, code := runDiff(t); code != 0 {
			return errors.New(out)
		}
		return nil
	})

	sharedMu.Lock()
	err := shared.Stop()
	shared = nil
	sharedMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	key := ipvs.Key{Address: vip.Addr(), Port: 80, Protocol: ipvs.TCP}
	extra := mustAddr("10.96.61.99")
	entry := ipset.Entry{IP: vip.Addr(), Protocol: ipset.EntryTCP, Port: 80}
	errs := kernelIPVS(t).Write([]ipvs.Op{{Kind: ipvs.DeleteRS, VS: ipvs.VirtualServer{Key: key, Scheduler: "rr"},
		RS: ipvs.RealServer{Address: b.IP, Port: 8080}}})
	errs = append(errs, klinks.AddAddresses([]netip.Addr{extra})...)
	errs = append(errs, ksets.DeleteEntries("KUBE-CLUSTER-IP", []ipset.Entry{entry})...)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	wantRows := []diff.Row{
		{Kind: diff.KindAddress, Change: diff.Extra, Object: "10.96.61.99"},
		{Kind: diff.KindRealServer, Change: diff.Missing, Object: "10.96.61.10:80/TCP 10.244.61.2:8080", Want: "weight 1"},
		{Kind: diff.KindSetEntry, Change: diff.Missing, Object: "KUBE-CLUSTER-IP 10.96.61.10,tcp:80"},
	}
	out, code := runDiff(t)
	if code != 1 {
		t.Fatalf("diff exit %d, want 1 on drift:\n%s", code, out)
	}
	for _, r := range wantRows {
		if !strings.Contains(out, r.Object) {
			t.Errorf("the table lacks %s:\n%s", r, out)
		}
	}
	out, code = runDiff(t, "-o", "json")
	var rows []diff.Row
	if err := json.Unmarshal([]byte(out), &rows); code != 1 || err != nil {
		t.Fatalf("diff -o json: exit %d, %v:\n%s", code, err, out)
	}
	if !slices.Equal(rows, wantRows) {
		t.Errorf("diff -o json rows:\n%v\nwant:\n%v", rows, wantRows)
	}
	if !hasAddress(t, extra) || hasEntry(t, "KUBE-CLUSTER-IP", entry) {
		t.Fatal("diff changed the kernel")
	}

	ourProxier(t)
	eventually(t, "diff exits 0 after the proxier's check", 30*time.Second, func() error {
		if out, code := runDiff(t); code != 0 {
			return errors.New(out)
		}
		return nil
	})
	waitAnswerSet(t, client.HTTP, vip, "diff-a,diff-b", 6, 10*time.Second)

	// The running proxier's view: status and /debug/state.
	out, code = runOurs(t, "status", "--service", ns+"/web")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("status: exit %d, want 0 and one Service:\n%s", code, out)
	}
	for _, w := range []string{"diff/web", "10.96.61.10:80/TCP", "2/2", "rr", "ago", "-"} {
		if !strings.Contains(lines[1], w) {
			t.Errorf("status line %q lacks %q", lines[1], w)
		}
	}
	out, code = runOurs(t, "status", "-o", "json", "--service", ns+"/web")
	var st view.State
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || len(st.Services) != 1 {
		t.Fatalf("status -o json: exit %d, %v:\n%s", code, err, out)
	}
	vs := st.Services[0].VirtualServers[0]
	if !vs.Held || len(vs.Reals) != 2 || !vs.Reals[0].Held || !vs.Reals[1].Held || st.Services[0].Programmed.IsZero() {
		t.Errorf("/debug/state of diff/web: %+v", st.Services[0])
	}
}
