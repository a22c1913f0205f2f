package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeRun writes a results directory named name holding records.
func writeRun(t *testing.T, root, name string, records ...record) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(records)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestMergeKeepsEachMixAndScaleFromOneRun: a merged baseline holds every
// run's records marked with their run, a part per mix in its report, and
// refuses two runs that both measured a mix at a scale.
func TestMergeKeepsEachMixAndScaleFromOneRun(t *testing.T) {
	root := t.TempDir()
	cold := func(proxier string, n int, mix string, v float64) record {
		return record{Proxier: proxier, Scenario: "cold-start", Services: n, EndpointsPerService: 10, P99ms: ptr(v), Mix: mix}
	}
	plain10k := writeRun(t, root, "run-a", cold("floor", 10000, "", 9000), cold("kube-ipvs-proxy", 10000, "", 6000))
	plain1k := writeRun(t, root, "run-b", cold("floor", 1000, "", 900), cold("kube-ipvs-proxy", 1000, "", 1800), cold("kube-ipvs-proxy", 1000, mixDual, 2500))
	out := filepath.Join(root, "baseline")
	if err := merge(out, []string{plain10k, plain1k}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got []record
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0].Services != 1000 || got[0].Run != "run-b" || got[len(got)-1].Run != "run-a" {
		t.Fatalf("merged records %+v", got)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	report := string(md)
	for _, want := range []string{"# Plain ClusterIPs", "# Dual-stack Services", "Run `run-a`.", "(dual-stack Services)", "0.67×"} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	again := writeRun(t, root, "run-c", cold("kube-proxy", 1000, "", 300000))
	if err := merge(filepath.Join(root, "refused"), []string{plain1k, again}); err == nil || !strings.Contains(err.Error(), "run-b and run-c") {
		t.Errorf("two runs of plain 1k merged: %v", err)
	}

	// The merged baseline first, then a run of one of its parts: that part
	// is the new run's, the others stay with their runs.
	refreshed := filepath.Join(root, "refreshed")
	if err := merge(refreshed, []string{out, again}); err != nil {
		t.Fatal(err)
	}
	data, err = os.ReadFile(filepath.Join(refreshed, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, r := range got {
		runs[fmt.Sprintf("%s %d %s", r.Mix, r.Services, r.Run)]++
	}
	want := map[string]int{" 1000 run-c": 1, mixDual + " 1000 run-b": 1, " 10000 run-a": 2}
	if !maps.Equal(runs, want) {
		t.Errorf("refreshed baseline's parts by run %v, want %v", runs, want)
	}
	if err := merge(filepath.Join(root, "refused2"), []string{again, out}); err == nil {
		t.Error("a baseline given after a run of one of its parts replaced the newer run")
	}
}
