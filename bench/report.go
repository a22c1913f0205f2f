package main

import (
	"fmt"
	"sort"
	"strings"
)

func fmtMs(v *float64) string {
	if v == nil {
		return "–"
	}
	if *v < 0 { // a time "after" an event that came later
		return fmtMs(ptr(-*v)) + " before"
	}
	if *v >= 10000 {
		return fmt.Sprintf("%.1f s", *v/1000)
	}
	return fmt.Sprintf("%.1f ms", *v)
}

func ratio(a, b *float64) string {
	if a == nil || b == nil || *b == 0 {
		return "–"
	}
	if r := *a / *b; r < 1 {
		return fmt.Sprintf("1/%.3g", 1/r) // N times lower
	}
	return fmt.Sprintf("%.3g×", *a / *b)
}

func fmtF(v *float64, unit string) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f %s", *v, unit)
}

func fmtInt(v *int) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprint(*v)
}

func fmtBool(v *bool) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprint(*v)
}

// column is one column of a scenario's table; floor and upstream are the
// rows of the same table for the ratios, nil when absent.
type column struct {
	title string
	cell  func(r, floor, upstream *record) string
}

var (
	colProxier = column{"proxier", func(r, _, _ *record) string { return r.Proxier }}
	colSamples = column{"samples", func(r, _, _ *record) string { return fmtInt(r.Samples) }}
	colP50     = column{"p50", func(r, _, _ *record) string { return fmtMs(r.P50ms) }}
	colP99     = column{"p99", func(r, _, _ *record) string { return fmtMs(r.P99ms) }}
	colCPU     = column{"CPU", func(r, _, _ *record) string { return fmtF(r.CPUs, "s") }}
	colRSS     = column{"RSS", func(r, _, _ *record) string { return fmtF(r.RSSMB, "MB") }}
	colOK      = column{"kernel state ok", func(r, _, _ *record) string { return fmtBool(r.KernelObjectsOK) }}
	colNote    = column{"note", func(r, _, _ *record) string { return r.Note }}
)

func vs(get func(*record) *float64, title string, against func(floor, upstream *record) *record) column {
	return column{title, func(r, floor, upstream *record) string {
		o := against(floor, upstream)
		if o == nil {
			return "–"
		}
		return ratio(get(r), get(o))
	}}
}

func p99(r *record) *float64               { return r.P99ms }
func afterWriteP99(r *record) *float64     { return r.AfterWriteP99ms }
func cpu(r *record) *float64               { return r.CPUs }
func completeAfterSync(r *record) *float64 { return r.CompleteAfterSyncMs }
func theFloor(f, _ *record) *record        { return f }
func theUpstream(_, u *record) *record     { return u }

// tables says which columns each scenario shows.
var tables = map[string][]column{
	"cold-start": {colProxier, {"complete", colP99.cell}, vs(p99, "vs floor", theFloor), vs(p99, "vs upstream", theUpstream),
		{"kubernetes ready", func(r, _, _ *record) string { return fmtMs(r.KubernetesReadyMs) }},
		{"… after caches synced", func(r, _, _ *record) string { return fmtMs(r.KubernetesReadyAfterSyncMs) }},
		{"complete after caches synced", func(r, _, _ *record) string { return fmtMs(r.CompleteAfterSyncMs) }},
		vs(completeAfterSync, "… vs floor", theFloor),
		colCPU, colRSS, colOK, colNote},
	"one-change": {colProxier, {"change", func(r, _, _ *record) string { return r.Change }}, colSamples, colP50, colP99,
		vs(p99, "p99 vs floor", theFloor), vs(p99, "p99 vs upstream", theUpstream),
		{"after the API write p50 / p99", func(r, _, _ *record) string {
			return fmtMs(r.AfterWriteP50ms) + " / " + fmtMs(r.AfterWriteP99ms)
		}},
		vs(afterWriteP99, "… p99 vs floor", theFloor),
		{"API answer p50 / p99", func(r, _, _ *record) string { return fmtMs(r.AnswerP50ms) + " / " + fmtMs(r.AnswerP99ms) }},
		{"own metric p50 / p99", func(r, _, _ *record) string { return fmtMs(r.MetricP50ms) + " / " + fmtMs(r.MetricP99ms) }},
		colCPU, colRSS, colOK, colNote},
	"churn": {colProxier, {"writes", colSamples.cell}, {"own metric p50", colP50.cell}, {"own metric p99", colP99.cell},
		vs(p99, "p99 vs upstream", theUpstream), colCPU, vs(cpu, "CPU vs upstream", theUpstream), colRSS, colOK, colNote},
	"steady-sync": {colProxier, {"syncs observed", colSamples.cell}, {"full sync p50", colP50.cell},
		{"CPU per sync period", colCPU.cell}, vs(cpu, "vs upstream", theUpstream), colRSS, colNote},
	"ipvs-stats": {colProxier, {"series", colSamples.cell}, {"CPU per scrape", colCPU.cell}, {"time per scrape", colP50.cell}, colNote},
	"restart": {colProxier, {"time to synced", colP99.cell}, vs(p99, "vs upstream", theUpstream), colCPU, colRSS,
		{"nothing removed", colOK.cell}, colNote},
	"big-service": {colProxier, {"phase", func(r, _, _ *record) string { return r.Change }},
		{"big Service in / gone", func(r, _, _ *record) string { return fmtMs(r.BigServiceMs) }},
		{"other changes", colSamples.cell}, colP50, colP99,
		{"max", func(r, _, _ *record) string { return fmtMs(r.MaxMs) }},
		{"longest sync", func(r, _, _ *record) string { return fmtMs(r.LongestSyncMs) }},
		{"max ≤ longest sync + 1 s", func(r, _, _ *record) string { return oneSyncVerdict(r) }},
		{"after the API write p50 / p99", func(r, _, _ *record) string {
			return fmtMs(r.AfterWriteP50ms) + " / " + fmtMs(r.AfterWriteP99ms)
		}},
		colCPU, colRSS, colOK, colNote},
}

var scenarioOrder = []string{"cold-start", "one-change", "churn", "steady-sync", "ipvs-stats", "restart", "big-service"}

var scenarioText = map[string]string{
	"cold-start": "Proxier started with every object present, until the kernel holds the complete state " +
		"(and default/kubernetes alone: VS, real server, VIP, ipset entries, masquerade rules). " +
		"“After caches synced” counts from the proxier's log line saying its informers have every object: " +
		"its own work, comparable to the floor, which writes the same objects with one netlink message per system call. " +
		"Each proxier starts after the ip_vs module is reloaded (the kernel keeps deleted real servers for minutes and searches them on every add).",
	"one-change": "API write until the kernel shows it, samples 2.1 s apart, cycling through the kinds. " +
		"The floor is the API write, its watch event and one netlink call (endpoint add/remove). " +
		"“After the API write” counts from the write's answer instead (for a Service add, the last of its two writes): " +
		"the apiserver's own time left out, which grows with the cluster for a Service create or delete (ClusterIP allocation). " +
		"“API answer” is that time alone, from the write sent until its answer: no proxier's p99 from the request can be below its p99. " +
		"“Own metric” is the proxier's kubeproxy_network_programming_duration_seconds: the upper bound of the bucket holding p50 / p99 (kube-proxy's buckets: 0.25 s, 0.5 s, 1 s, 2 s, …).",
	"churn": "Endpoint changes at a fixed rate; latency is the proxier's own network programming metric (bucket upper bounds); " +
		"kernel state ok means the exact final set of real servers was reached.",
	"steady-sync": "No changes: the process's CPU over three default sync periods (90 s) without touching it, per period " +
		"(one periodic full sync each; idle time counts). Full sync p50 is ours only, from our full-sync metric: " +
		"upstream's sync histogram mixes its IPv4 and IPv6 proxiers.",
	"ipvs-stats": "What --ipvs-stats costs one scrape of /metrics on the cold start's kernel: reading every virtual and real server's " +
		"statistics over netlink and writing their series as Prometheus text, measured in the bench process (ours only).",
	"restart": "Proxier stopped and started again on the full kernel: time until its first sync, while every " +
		"kube-ipvs0 address (netlink events) and a sample of virtual servers, real servers and ipset entries (polled) is watched.",
	"big-service": "One Service with 300 TCP ports and 300 external IPs (90,300 virtual servers, 180,600 real servers) and a " +
		"slice of 2 endpoints, on the cold start's state: written (“program”: from the Service's create until every virtual server " +
		"is in the kernel, the real servers checked on 60 of them), held until a drift check has read it (“hold”), " +
		"one of its endpoints replaced as by a rolling update (“endpoint”: a real server added and one removed on every virtual server), deleted " +
		"(“delete”: until every one is gone), then 10 s more (“after”: the kernel's dest trash holds its real servers). " +
		"Throughout, two lanes add an endpoint to an ordinary Service or remove it again, each change timed as in one-change; " +
		"a change counts in the phase it was sent in. Longest sync is the longest a sync held the sync goroutine in the phase " +
		"(from our -v 4 log; a drift check's background read left out); the claim is that another Service's change is delayed " +
		"by at most one sync: its max within the longest sync + 1 s (the min sync period it may wait out). " +
		"The floor writes and deletes the same objects with one netlink message each beside its own one-change samples: " +
		"what the kernel alone costs other changes. Upstream kube-proxy is not measured (see its note).",
}

// oneSyncVerdict judges a big-service phase's slowest other change against
// its longest sync.
func oneSyncVerdict(r *record) string {
	if r.MaxMs == nil || r.LongestSyncMs == nil {
		return "–"
	}
	over := fmt.Sprintf(" (%+.0f ms)", *r.MaxMs-*r.LongestSyncMs)
	if withinOneSync(msDuration(*r.MaxMs), msDuration(*r.LongestSyncMs)) {
		return "yes" + over
	}
	return "**no**" + over
}

// report renders results as Markdown: one table per scenario and scale, with
// figures also as ratios to the raw-netlink floor and to upstream; a
// baseline merged from several runs has a part per mix.
func report(records []record, plots []string) string {
	var b strings.Builder
	b.WriteString("# Benchmark report\n\nMeasured inside the test VM (see docs/testing.md and docs/performance.md); " +
		"numbers are for ratios within one run.")
	runs := runsOf(records)
	if len(runs) > 1 {
		fmt.Fprintf(&b, "\n\nMerged by `make bench-baseline` from %d runs (`%s`); each table names its run, "+
			"and every table's proxiers were measured in the same run. CPU profiles of kube-ipvs-proxy stay in each run's profiles/.\n", len(runs), strings.Join(runs, "`, `"))
	} else {
		b.WriteString(" CPU profiles of kube-ipvs-proxy are in profiles/.\n")
	}
	mixes := mixesOf(records)
	if len(mixes) > 1 && len(plots) > 0 {
		fmt.Fprintf(&b, "\nThe plots show the %s.\n", mixTitle(mixes[0]))
	}
	for _, p := range plots {
		fmt.Fprintf(&b, "\n![%s](%s)\n", strings.TrimSuffix(p, ".svg"), p)
	}
	for _, r := range records {
		if r.Scenario == "error" {
			var where string
			if r.Mix != "" {
				where = ", " + mixTitle(r.Mix)
			}
			if len(runs) > 1 {
				where += ", run `" + r.Run + "`"
			}
			fmt.Fprintf(&b, "\n**%s at %d Services%s failed:** %s\n", r.Proxier, r.Services, where, r.Note)
		}
	}
	for _, mix := range mixes {
		var rs []record
		for _, r := range records {
			if r.Mix == mix {
				rs = append(rs, r)
			}
		}
		if len(mixes) > 1 {
			fmt.Fprintf(&b, "\n# %s\n", strings.ToUpper(mixTitle(mix)[:1])+mixTitle(mix)[1:])
		}
		if text := mixText[mix]; text != "" {
			b.WriteString("\n" + text + "\n")
		}
		b.WriteString(targetsSection(rs))
		b.WriteString(beforeSection(rs))
		scenarioTables(&b, rs, len(runs) > 1)
	}
	return b.String()
}

// mixText describes a mix other than the default one.
var mixText = map[string]string{
	mixMixed: "Services mixed as in bench/mix.go: of every 100, 10 NodePorts with externalTrafficPolicy Local, " +
		"10 with Cluster, 5 LoadBalancers with two source ranges, 5 ClusterIPs with an external IP, 70 ClusterIPs; " +
		"the node has 3 addresses.",
	mixDual: "Dual-stack Services as in bench/dual.go: every Service has an IPv4 and an IPv6 ClusterIP and a slice of " +
		"each family with as many endpoints, so every kernel object is there twice, once per family; " +
		"the changes, churn and restart samples are on the IPv4 half.",
}

// mixTitle names a mix in headings.
func mixTitle(mix string) string {
	switch mix {
	case "":
		return "plain ClusterIPs"
	case mixMixed:
		return "mixed Services"
	case mixDual:
		return "dual-stack Services"
	}
	return mix + " Services"
}

// mixesOf lists the records' mixes, the default one first.
func mixesOf(records []record) []string {
	var mixes []string
	for _, r := range records {
		if !contains(mixes, r.Mix) {
			mixes = append(mixes, r.Mix)
		}
	}
	order := map[string]int{"": 0, mixMixed: 1, mixDual: 2}
	sort.SliceStable(mixes, func(i, j int) bool { return order[mixes[i]] < order[mixes[j]] })
	return mixes
}

// runsOf lists the runs merged records came from, in order.
func runsOf(records []record) []string {
	var runs []string
	for _, r := range records {
		if r.Run != "" && !contains(runs, r.Run) {
			runs = append(runs, r.Run)
		}
	}
	sort.Strings(runs)
	return runs
}

// scenarioTables writes one mix's tables, a scenario at a scale each, each
// naming its run when the records were merged from several.
func scenarioTables(b *strings.Builder, records []record, merged bool) {
	for _, scenario := range scenarioOrder {
		byScale := map[int][]record{}
		var scales []int
		for _, r := range records {
			if r.Scenario != scenario {
				continue
			}
			if _, ok := byScale[r.Services]; !ok {
				scales = append(scales, r.Services)
			}
			byScale[r.Services] = append(byScale[r.Services], r)
		}
		sort.Ints(scales)
		for _, n := range scales {
			rs := byScale[n]
			var mix, run string
			if rs[0].Mix != "" {
				mix = " (" + mixTitle(rs[0].Mix) + ")"
			}
			if merged {
				run = " Run `" + rs[0].Run + "`."
			}
			fmt.Fprintf(b, "\n## %s, %d Services × %d endpoints%s\n\n%s%s\n\n", scenario, n, rs[0].EndpointsPerService, mix, scenarioText[scenario], run)
			cols := tables[scenario]
			var titles []string
			for _, c := range cols {
				titles = append(titles, c.title)
			}
			b.WriteString("| " + strings.Join(titles, " | ") + " |\n|" + strings.Repeat("---|", len(cols)) + "\n")
			// Ratios compare rows of the same kind of change.
			for i := range rs {
				r := &rs[i]
				var floor, upstream *record
				for j := range rs {
					if rs[j].Change != r.Change {
						continue
					}
					switch rs[j].Proxier {
					case "floor":
						floor = &rs[j]
					case "kube-proxy":
						upstream = &rs[j]
					}
				}
				if scenario == "one-change" && floor == nil {
					// The floor measures endpoint changes only; compare
					// every kind with them.
					for j := range rs {
						if rs[j].Proxier == "floor" {
							floor = &rs[j]
						}
					}
				}
				var cells []string
				for _, c := range cols {
					cells = append(cells, c.cell(r, floor, upstream))
				}
				b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
			}
		}
	}
}
