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
	return fmt.Sprintf("%.1f %s", *v, unit)
}

// report renders results as Markdown: one table per scenario and scale, with
// every figure also as a ratio to the raw-netlink floor and to upstream.
func report(records []record) string {
	type key struct {
		scenario string
		services int
	}
	groups := map[key][]record{}
	var keys []key
	for _, r := range records {
		k := key{r.Scenario, r.Services}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], r)
	}
	sort.SliceStable(keys, func(i, j int) bool {
		if keys[i].scenario != keys[j].scenario {
			return keys[i].scenario < keys[j].scenario
		}
		return keys[i].services < keys[j].services
	})
	var b strings.Builder
	b.WriteString("# Benchmark report\n\nMeasured inside the test VM (see docs/testing.md); numbers are for ratios within one run.\n")
	for _, k := range keys {
		rs := groups[k]
		var floor, upstream *record
		for i := range rs {
			switch rs[i].Proxier {
			case "floor":
				floor = &rs[i]
			case "kube-proxy":
				upstream = &rs[i]
			}
		}
		fmt.Fprintf(&b, "\n## %s, %d Services × %d endpoints\n\n", k.scenario, k.services, rs[0].EndpointsPerService)
		b.WriteString("| proxier | samples | p50 | p99 | p99 vs floor | p99 vs upstream | kubernetes ready | CPU | RSS | kernel state ok | note |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rs {
			var fl, up *float64
			if floor != nil {
				fl = floor.P99ms
			}
			if upstream != nil {
				up = upstream.P99ms
			}
			samples, ok := "–", "–"
			if r.Samples != nil {
				samples = fmt.Sprint(*r.Samples)
			}
			if r.KernelObjectsOK != nil {
				ok = fmt.Sprint(*r.KernelObjectsOK)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Proxier, samples,
				fmtMs(r.P50ms), fmtMs(r.P99ms), ratio(r.P99ms, fl), ratio(r.P99ms, up), fmtMs(r.KubernetesReadyMs),
				fmtF(r.CPUs, "s"), fmtF(r.RSSMB, "MB"), ok, r.Note)
		}
	}
	return b.String()
}
