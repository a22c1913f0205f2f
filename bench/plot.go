package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// chart is a grouped bar chart: one group per scale, one bar per proxier.
type chart struct {
	file, title, unit string
	log               bool
	value             func(r record) *float64
	match             func(r record) bool
}

var charts = []chart{
	{"one-change-p99.svg", "One change: p99 latency", "ms", true,
		func(r record) *float64 { return r.P99ms },
		func(r record) bool { return r.Scenario == "one-change" && r.Change == "all" }},
	{"cold-start.svg", "Cold start: complete state", "ms", true,
		func(r record) *float64 { return r.P99ms },
		func(r record) bool { return r.Scenario == "cold-start" }},
	{"steady-cpu.svg", "Steady state: CPU per 30 s sync period", "s", true,
		func(r record) *float64 { return r.CPUs },
		func(r record) bool { return r.Scenario == "steady-sync" }},
	{"rss.svg", "Memory: RSS after the cold start", "MB", false,
		func(r record) *float64 { return r.RSSMB },
		func(r record) bool { return r.Scenario == "cold-start" }},
}

var proxierColors = map[string]string{"floor": "#999999", "kube-ipvs-proxy": "#1f77b4", beforeName: "#ff7f0e", "kube-proxy": "#d62728", fakeModeName: "#9ecae1"}

// writePlots renders every chart that has data into dir and returns the
// file names.
func writePlots(dir string, records []record) ([]string, error) {
	var files []string
	for _, c := range charts {
		svg := c.render(records)
		if svg == "" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, c.file), []byte(svg), 0o644); err != nil {
			return nil, err
		}
		files = append(files, c.file)
	}
	return files, nil
}

func (c chart) render(records []record) string {
	vals := map[int]map[string]float64{}
	var scales []int
	var proxiers []string
	lo, hi := math.Inf(1), 0.0
	for _, r := range records {
		v := c.value(r)
		if !c.match(r) || v == nil || *v <= 0 {
			continue
		}
		if vals[r.Services] == nil {
			vals[r.Services] = map[string]float64{}
			scales = append(scales, r.Services)
		}
		vals[r.Services][r.Proxier] = *v
		if !contains(proxiers, r.Proxier) {
			proxiers = append(proxiers, r.Proxier)
		}
		lo, hi = math.Min(lo, *v), math.Max(hi, *v)
	}
	if len(scales) == 0 {
		return ""
	}
	sort.Ints(scales)
	sort.Slice(proxiers, func(i, j int) bool { return order(proxiers[i]) < order(proxiers[j]) })

	const w, h, left, right, top, bottom = 760.0, 320.0, 70.0, 250.0, 40.0, 40.0
	plotW, plotH := w-left-right, h-top-bottom
	// y maps a value to a height in [0, plotH].
	var y func(float64) float64
	var ticks []float64
	if c.log {
		// A decade below the smallest value, so that every bar shows.
		a, b := math.Floor(math.Log10(lo))-1, math.Ceil(math.Log10(hi))
		if b == a {
			b++
		}
		y = func(v float64) float64 { return plotH * (math.Log10(v) - a) / (b - a) }
		for e := a; e <= b; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
	} else {
		top := niceCeil(hi)
		y = func(v float64) float64 { return plotH * v / top }
		for i := 0; i <= 4; i++ {
			ticks = append(ticks, top*float64(i)/4)
		}
	}
	var s strings.Builder
	fmt.Fprintf(&s, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&s, `<rect width="100%%" height="100%%" fill="white"/><text x="%.0f" y="22" font-size="15" font-weight="bold">%s (%s%s)</text>`+"\n",
		left, c.title, c.unit, map[bool]string{true: ", log scale", false: ""}[c.log])
	for _, t := range ticks {
		ty := top + plotH - y(t)
		fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			left, left+plotW, ty, ty, left-6, ty+4, short(t))
	}
	groupW := plotW / float64(len(scales))
	barW := groupW * 0.8 / float64(len(proxiers))
	for gi, n := range scales {
		gx := left + float64(gi)*groupW + groupW*0.1
		for pi, p := range proxiers {
			v, ok := vals[n][p]
			if !ok {
				continue
			}
			bh := math.Max(1, y(v))
			x := gx + float64(pi)*barW
			fmt.Fprintf(&s, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %d: %s %s</title></rect>`+"\n",
				x, top+plotH-bh, barW-2, bh, proxierColors[p], p, n, short(v), c.unit)
		}
		fmt.Fprintf(&s, `<text x="%.1f" y="%.0f" text-anchor="middle">%d Services</text>`+"\n", gx+groupW*0.4, top+plotH+18, n)
	}
	fmt.Fprintf(&s, `<line x1="%.0f" x2="%.0f" y1="%.0f" y2="%.0f" stroke="black"/>`+"\n", left, left+plotW, top+plotH, top+plotH)
	for i, p := range proxiers {
		ly := top + 10 + float64(i)*20
		fmt.Fprintf(&s, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n",
			left+plotW+15, ly, proxierColors[p], left+plotW+32, ly+10, p)
	}
	s.WriteString("</svg>\n")
	return s.String()
}

func order(p string) int {
	return map[string]int{"floor": 0, "kube-ipvs-proxy": 1, beforeName: 2, fakeModeName: 3, "kube-proxy": 4}[p]
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

func short(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.3gM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.3gk", v/1e3)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
