//go:build e2e

// Package e2e tests kube-ipvs-proxy against a real kube-apiserver and the real
// kernel of the test VM, with real packets. Run it with `make e2e`.
//
// Serial tests (the upstream comparison, the restart) run first; the others
// run in parallel against one shared proxier, each in its own namespace,
// address range and pods.
package e2e

import (
	"fmt"
	"io"
	stdlog "log"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

var (
	env *framework.Env

	sharedMu sync.Mutex
	shared   *framework.Process
)

// proxierFlags keep the suite quick: a 5 s drift check instead of 30 s, and
// syncs right after a change. The node-wide settings are set to values the
// kernel does not default to, which TestKernelSettings checks. The IPVS
// statistics are exported (TestIPVSStatsCountEachBackend).
var proxierFlags = append([]string{"--ipvs-sync-period", "5s", "--ipvs-min-sync-period", "100ms", "--ipvs-stats",
	"--ipvs-strict-arp", "--ipvs-tcp-timeout", "1000s", "--ipvs-tcpfin-timeout", "100s", "--ipvs-udp-timeout", "200s",
	"--ipvs-exclude-cidrs", excludedCIDR}, ruleFlags...)

// ruleFlags change the iptables rules; upstream gets them too in the oracle.
// Pods' links are named kv…, outside hosts' kx… (framework.StartPod).
var ruleFlags = []string{"--detect-local-mode", "InterfaceNamePrefix", "--pod-interface-name-prefix", framework.PodLinkPrefix}

// excludedCIDR holds kernel objects that are not the proxier's (TestExcludedCIDRsLeftAlone).
const excludedCIDR = "10.250.99.0/24"

func TestMain(m *testing.M) {
	var err error
	if env, err = framework.Load(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(2)
	}
	if err := framework.CleanKernel(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: clean kernel:", err)
		os.Exit(2)
	}
	// The netlink library logs every set header attribute it does not parse
	// (newer kernels' bucketsize and initval) on each ipset read the tests
	// make: four lines in five of the suite's output, hiding the failures.
	stdlog.SetOutput(io.Discard)
	code := m.Run()
	if shared != nil {
		_ = shared.Stop()
	}
	os.Exit(code)
}

// ourProxier returns the shared proxier, starting it if needed.
func ourProxier(t *testing.T) *framework.Process {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		if done, err := shared.Exited(); !done {
			return shared
		} else {
			t.Fatalf("shared proxier exited: %v (see %s)", err, shared.LogPath)
		}
	}
	start := time.Now()
	p, err := framework.StartOurs(env, "kube-ipvs-proxy", proxierFlags...)
	if err != nil {
		t.Fatal(err)
	}
	if err := framework.WaitSynced(p, start, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	shared = p
	return p
}

// replaceProxier makes p (nil for none) the proxier later tests share.
func replaceProxier(t *testing.T, p *framework.Process) {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	shared = p
}

func mustPod(t *testing.T, name, ip string, serve bool) *framework.Pod {
	t.Helper()
	p, err := framework.StartPod(env, name, mustAddr(ip), serve)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Delete)
	return p
}

func mustNamespace(t *testing.T, ns string) {
	t.Helper()
	if err := env.CreateNamespace(ns); err != nil {
		t.Fatal(err)
	}
}

func mustApply(t *testing.T, objs ...any) {
	t.Helper()
	if err := env.Apply(objs...); err != nil {
		t.Fatal(err)
	}
}
