package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const junitOurs = `<testsuites><testsuite time="4135.6">
<testcase name="[It] [sig-network] Services should serve a basic endpoint from pods [Conformance]" status="passed" time="20.5"></testcase>
<testcase name="[It] [sig-network] Services should be rejected when no endpoints exist" status="failed" time="31"><failure message="no REFUSED"></failure></testcase>
<testcase name="[It] [sig-network] Services should respect internalTrafficPolicy=Local Pod to Pod" status="skipped" time="0.1"><skipped message="Requires at least 2 nodes (not 1)"></skipped></testcase>
<testcase name="[It] [sig-storage] something else" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-network] API Server should provide secure master service [Conformance]" status="passed" time="3"></testcase>
<testcase name="[It] [sig-network] Services should work after restarting kube-proxy [Disruptive]" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-network] Services should serve endpoints on same port and different protocols [Conformance]" status="failed" time="94"><failure message="" type="failed">[FAILED] service not reachable within 2m0s timeout
In [It] at: k8s.io/kubernetes/test/e2e/network/service.go:1 @ 11/28/26 20:03:31.145
</failure></testcase>
<testcase name="[SynchronizedBeforeSuite]" status="passed" time="1"></testcase>
</testsuite></testsuites>`

const junitUpstream = `<testsuites><testsuite>
<testcase name="[It] [sig-network] Services should serve a basic endpoint from pods [Conformance]" status="passed" time="25"></testcase>
<testcase name="[It] [sig-network] Services should be rejected when no endpoints exist" status="passed" time="12"></testcase>
</testsuite></testsuites>`

// The report lists each selected test once with each proxier's result,
// leaves out tests the focus did not select, counts the passes, and fails
// when ours fails a test upstream passes.
func TestReportPutsProxiersSideBySide(t *testing.T) {
	dir := t.TempDir()
	for p, x := range map[string]string{"ours": junitOurs, "upstream": junitUpstream} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p, "junit_01.xml"), []byte(x), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Two nodes' proxier CPU for upstream, one unreadable.
	if err := os.MkdirAll(filepath.Join(dir, "upstream", "node"), 0o755); err != nil {
		t.Fatal(err)
	}
	for node, line := range map[string]string{
		"kip-node-1": "kube-proxy pid 871: own 50.1 s, child processes 175.0 s\n",
		"kip-node-2": "kube-proxy pid 889: own 30.0 s, child processes 125.0 s\n",
		"kip-node-3": "error: no kube-proxy or kube-ipvs-proxy process in /run/netns/kip-node-3\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, "upstream", "node", "cpu-"+node+".txt"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	err := run(dir, []string{"ours", "upstream"})
	if err == nil || !strings.Contains(err.Error(), "should be rejected when no endpoints exist") {
		t.Errorf("ours fails a test upstream passes, and the report says %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, want := range []string{
		"| [sig-network] Services should serve endpoints on same port and different protocols [Conformance] | **failed** (94 s): service not reachable within 2m0s timeout | not run |",
		"ours: 2/3 conformance tests, 2/4 of all tests run in 69 min; upstream: 1/1 conformance tests, 2/2 of all tests run (its proxier's CPU per node: 40 s own, 150 s in processes it ran)",
		"| [sig-network] API Server should provide secure master service [Conformance] | passed (3 s) | not run |",
		"| [sig-network] Services should be rejected when no endpoints exist | **failed** (31 s): no REFUSED | passed (12 s) |",
		"| [sig-network] Services should respect internalTrafficPolicy=Local Pod to Pod | skipped: Requires at least 2 nodes (not 1) | not run |",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, "sig-storage") || strings.Contains(report, "BeforeSuite") || strings.Contains(report, "restarting kube-proxy") {
		t.Errorf("report lists tests the focus did not select, or set-up nodes:\n%s", report)
	}
}
