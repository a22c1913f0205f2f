package main

import (
	"maps"
	"strings"
	"testing"
)

func TestTargetsJudgeOursAgainstFloorAndUpstream(t *testing.T) {
	const n = 10000
	rec := func(proxier, scenario string, p99 float64) record {
		return record{Proxier: proxier, Scenario: scenario, Services: n, P99ms: ptr(p99)}
	}
	floorCold := rec("floor", "cold-start", 10000)
	oursCold := rec("kube-ipvs-proxy", "cold-start", 20000) // 2× from exec
	oursCold.CompleteAfterSyncMs = ptr(9000.0)              // 0.9× after the caches synced
	oursCold.KubernetesReadyAfterSyncMs = ptr(1200.0)       // too late
	oursCold.RSSMB = ptr(150.0)
	upCold := rec("kube-proxy", "cold-start", 480000)
	upCold.RSSMB, upCold.KernelObjectsOK = ptr(250.0), ptr(false)
	oursOne := rec("kube-ipvs-proxy", "one-change", 200)
	oursOne.Change = "all"
	upOne := rec("kube-proxy", "one-change", 15000) // only 75× ours
	upOne.Change = "all"
	floorOne := rec("floor", "one-change", 100)
	floorOne.Change = "all"
	oursSteady, upSteady := rec("kube-ipvs-proxy", "steady-sync", 0), rec("kube-proxy", "steady-sync", 0)
	oursSteady.CPUs, upSteady.CPUs = ptr(0.5), ptr(8.0)
	endpointAdd := rec("kube-ipvs-proxy", "one-change", 99999) // a kind's row, not "all"
	endpointAdd.Change = "endpoint-add"

	got := map[string]target{}
	for _, tg := range targets([]record{floorCold, oursCold, upCold, endpointAdd, oursOne, upOne, floorOne, oursSteady, upSteady}) {
		if tg.scale != "10k" {
			t.Errorf("target %q at scale %q, want 10k", tg.name, tg.scale)
		}
		got[tg.name] = tg
	}
	want := map[string]string{
		"cold start ≤ 1.5× the floor":                                  "met for the proxier's own work; not from exec",
		"default/kubernetes < 1 s after the caches synced":             "**not met**",
		"RSS lower than upstream's":                                    "met",
		"one change p99 ≥ 100× lower than upstream's":                  "**not met**",
		"one change p99 ≤ the floor's + 10 ms + min sync period (1 s)": "met",
		"periodic full sync ≥ 10× less CPU than upstream's":            "met",
		"steady state ≤ 1 CPU s per sync period":                       "met",
	}
	for name, v := range want {
		if got[name].verdict != v {
			t.Errorf("%s: verdict %q (figure %q), want %q", name, got[name].verdict, got[name].figure, v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d targets, want %d: %+v", len(got), len(want), got)
	}
	if f := got["cold start ≤ 1.5× the floor"].figure; f != "from exec 2.00×, after the caches synced 0.90×" {
		t.Errorf("cold start figure %q", f)
	}
	if f := got["RSS lower than upstream's"].figure; !strings.Contains(f, "incomplete") {
		t.Errorf("RSS figure %q does not say upstream was stopped incomplete", f)
	}
}

func TestTargetsCompareFiftyWithTenThousand(t *testing.T) {
	one := func(n int, p99, afterWrite, answer float64) record {
		return record{Proxier: "kube-ipvs-proxy", Scenario: "one-change", Change: "all", Services: n,
			P99ms: ptr(p99), AfterWriteP99ms: ptr(afterWrite), AnswerP99ms: ptr(answer)}
	}
	const apiserversMiss = "met after the API write; from the request the apiserver's answer alone is over 2× the 10k p99"
	for _, c := range []struct {
		large, largeAfter, largeAnswer float64
		want                           string
	}{
		{large: 400, largeAfter: 120, largeAnswer: 200, want: "met"},
		{large: 400, largeAfter: 260, largeAnswer: 200, want: "**not met**"},  // 2.6× after the write
		{large: 600, largeAfter: 100, largeAnswer: 450, want: "**not met**"},  // 2.4× from the write sent, ours
		{large: 600, largeAfter: 100, largeAnswer: 550, want: apiserversMiss}, // the answer alone is 2.2×
		{large: 600, largeAfter: 260, largeAnswer: 550, want: "**not met**"},  // and ours misses too
	} {
		var found bool
		for _, tg := range targets([]record{one(10000, 250, 100, 50), one(50000, c.large, c.largeAfter, c.largeAnswer)}) {
			if tg.name == "one change p99 at 50k within 2× of 10k" {
				found = true
				if tg.verdict != c.want {
					t.Errorf("50k p99 %v / %v ms: verdict %q (%s), want %q", c.large, c.largeAfter, tg.verdict, tg.figure, c.want)
				}
			}
		}
		if !found {
			t.Errorf("no 50k target for %+v", c)
		}
	}
	if s := targetsSection(nil); s != "" {
		t.Errorf("targets section without records: %q", s)
	}
}

func TestTargetsJudgeCriticalServicesAcrossScales(t *testing.T) {
	cold := func(n int, readyMs float64) record {
		return record{Proxier: "kube-ipvs-proxy", Scenario: "cold-start", Services: n, KubernetesReadyMs: ptr(readyMs)}
	}
	got := map[string]target{}
	for _, tg := range targets([]record{cold(100, 900), cold(10000, 1350), cold(50000, 1500)}) {
		got[tg.scale] = tg
	}
	if v := got["10k"].verdict; v != "met" || got["10k"].name != "default/kubernetes from exec within 0.5 s of 100's" {
		t.Errorf("10k: %+v, want met against 100's", got["10k"])
	}
	if v := got["50k"].verdict; v != "**not met**" {
		t.Errorf("50k, 0.6 s later than at 100: verdict %q, want not met", v)
	}
	if _, ok := got["100"]; ok {
		t.Error("the smallest scale is judged against itself")
	}
}

// The report sets the current code beside the code before it, figure by
// figure, with the change in percent.
func TestBeforeSection(t *testing.T) {
	cold := func(p string, ms float64) record {
		return record{Proxier: p, Scenario: "cold-start", Services: 10000, CompleteAfterSyncMs: ptr(ms)}
	}
	steady := func(p string, cpu, rss float64) record {
		return record{Proxier: p, Scenario: "steady-sync", Services: 10000, CPUs: ptr(cpu), RSSMB: ptr(rss)}
	}
	got := beforeSection([]record{cold("kube-ipvs-proxy", 1100), cold(beforeName, 1000),
		steady("kube-ipvs-proxy", 4, 50), steady(beforeName, 5, 50)})
	for _, want := range []string{"| cold start, after the caches synced (ms) | 10k | 1000.0 | 1100.0 | +10% |",
		"| steady CPU (s) | 10k | 5.0 | 4.0 | -20% |", "| steady RSS (MB) | 10k | 50.0 | 50.0 | +0% |"} {
		if !strings.Contains(got, want) {
			t.Errorf("section lacks %q:\n%s", want, got)
		}
	}
	if beforeSection([]record{cold("kube-ipvs-proxy", 1)}) != "" {
		t.Error("a section without the code before")
	}
}

// Issue #47's targets are judged at 10k and 50k from the scenarios that
// measure them.
func TestTargetsJudgeIdleCosts(t *testing.T) {
	ours := "kube-ipvs-proxy"
	recs := []record{
		{Proxier: ours, Scenario: "steady-sync", Services: 10000, CPUs: ptr(0.8)},
		{Proxier: ours, Scenario: "cold-start", Services: 10000, P99ms: ptr(10000.0)},
		{Proxier: ours, Scenario: "restart", Services: 10000, P99ms: ptr(6000.0), KernelObjectsOK: ptr(true),
			Note: "0 objects seen missing (all addresses watched, 21 objects polled); 0 kernel writes by the new process"},
		{Proxier: ours, Scenario: "ipvs-stats", Services: 10000, CPUs: ptr(3.4)},
		{Proxier: ours, Scenario: "cold-start", Services: 50000, RSSMB: ptr(340.0)},
	}
	got := map[string]string{}
	for _, tg := range idleTargets(recs, ours) {
		got[tg.name] = tg.verdict
	}
	want := map[string]string{
		"steady state ≤ 1 CPU s per sync period":     "met",
		"restart ≤ 0.5× cold start, no kernel write": "**not met**",
		"one /metrics/ipvs scrape ≤ 1 CPU s":         "**not met**",
		"RSS ≤ 350 MB (cold-start)":                  "met",
	}
	if !maps.Equal(got, want) {
		t.Errorf("verdicts %v, want %v", got, want)
	}
}
