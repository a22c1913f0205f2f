// Command conformance-report puts the e2e.test results of each proxier
// (DIR/<proxier>/junit_01.xml, from hack/conformance.sh) side by side:
// per test, passed, failed or skipped with the reason, and the duration.
//
//	conformance-report DIR PROXIER...   → DIR/report.md, and its summary on stdout
//
// It fails when ours fails a test that upstream passes.
package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

type suites struct {
	Suites []struct {
		Time  float64    `xml:"time,attr"`
		Cases []testcase `xml:"testcase"`
	} `xml:"testsuite"`
}

type testcase struct {
	Name    string  `xml:"name,attr"`
	Status  string  `xml:"status,attr"`
	Time    float64 `xml:"time,attr"`
	Skipped *struct {
		Message string `xml:"message,attr"`
	} `xml:"skipped"`
	Failure *struct {
		Message string `xml:"message,attr"`
		Text    string `xml:",chardata"`
	} `xml:"failure"`
}

// result is one test's outcome for one proxier.
type result struct {
	status, why string
	seconds     float64
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: conformance-report DIR PROXIER...")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-report:", err)
		os.Exit(1)
	}
}

func run(dir string, proxiers []string) error {
	results := map[string]map[string]result{} // test → proxier → result
	took := map[string]float64{}              // proxier → the suite's seconds
	cpu := map[string]proxierCPU{}
	for _, p := range proxiers {
		rs, seconds, err := read(filepath.Join(dir, p, "junit_01.xml"))
		if err != nil {
			return err
		}
		took[p] = seconds
		cpu[p] = readCPU(filepath.Join(dir, p, "node"))
		for name, r := range rs {
			if results[name] == nil {
				results[name] = map[string]result{}
			}
			results[name][p] = r
		}
	}
	names := make([]string, 0, len(results))
	for n := range results {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "# Kubernetes e2e tests (k8s.io/kubernetes e2e.test), every selected test\n\n")
	summary := summarize(names, results, took, cpu, proxiers)
	fmt.Fprintf(&b, "%s\n\n| test | %s |\n|---|%s\n", summary, strings.Join(proxiers, " | "), strings.Repeat("---|", len(proxiers)))
	for _, n := range names {
		var cells []string
		for _, p := range proxiers {
			r, ok := results[n][p]
			switch {
			case !ok:
				cells = append(cells, "not run")
			case r.status == "skipped":
				cells = append(cells, "skipped: "+oneLine(r.why))
			case r.status == "failed":
				cells = append(cells, fmt.Sprintf("**failed** (%.0f s): %s", r.seconds, oneLine(r.why)))
			default:
				cells = append(cells, fmt.Sprintf("%s (%.0f s)", r.status, r.seconds))
			}
		}
		fmt.Fprintf(&b, "| %s | %s |\n", strings.ReplaceAll(n, "|", `\|`), strings.Join(cells, " | "))
	}
	fmt.Println(summary)
	if err := os.WriteFile(filepath.Join(dir, "report.md"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	var worse []string
	for _, n := range names {
		ours, okOurs := results[n]["ours"]
		up, okUp := results[n]["upstream"]
		if okOurs && okUp && up.status == "passed" && ours.status != "passed" {
			worse = append(worse, n)
		}
	}
	if len(worse) > 0 {
		return fmt.Errorf("ours does not pass %d tests upstream passes: %s", len(worse), strings.Join(worse, "; "))
	}
	return nil
}

// read returns the tests of one junit file that the focus and skip
// expressions selected, by name (not the suite's set-up nodes), and how
// long the suites took.
func read(path string) (map[string]result, float64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	var s suites
	if err := xml.Unmarshal(data, &s); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]result{}
	var seconds float64
	for _, suite := range s.Suites {
		seconds += suite.Time
		for _, c := range suite.Cases {
			name := strings.TrimPrefix(c.Name, "[It] ")
			if !strings.HasPrefix(name, "[sig-") {
				continue
			}
			r := result{status: c.Status, seconds: c.Time}
			if c.Skipped != nil {
				if c.Skipped.Message == "skipped" {
					continue // not selected by the focus and skip expressions
				}
				r.why = c.Skipped.Message
			}
			if c.Failure != nil {
				r.why = failureReason(c.Failure.Message, c.Failure.Text)
			}
			out[name] = r
		}
	}
	return out, seconds, nil
}

// summarize counts the passes per proxier, of the conformance tests and of all.
func summarize(names []string, results map[string]map[string]result, took map[string]float64, cpu map[string]proxierCPU, proxiers []string) string {
	var parts []string
	for _, p := range proxiers {
		conf, confPassed, ran, passed := 0, 0, 0, 0
		for _, n := range names {
			r, ok := results[n][p]
			if !ok || r.status == "skipped" {
				continue
			}
			ran++
			if strings.Contains(n, "[Conformance]") {
				conf++
			}
			if r.status == "passed" {
				passed++
				if strings.Contains(n, "[Conformance]") {
					confPassed++
				}
			}
		}
		part := fmt.Sprintf("%s: %d/%d conformance tests, %d/%d of all tests run", p, confPassed, conf, passed, ran)
		if took[p] > 0 {
			part += fmt.Sprintf(" in %.0f min", took[p]/60)
		}
		if c := cpu[p]; c.nodes > 0 {
			part += fmt.Sprintf(" (its proxier's CPU per node: %.0f s own, %.0f s in processes it ran)", c.own/float64(c.nodes), c.children/float64(c.nodes))
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// proxierCPU sums what the nodes' cpu-NODE.txt files say (e2e/framework's
// KeepProxierMetrics): the proxier processes' own CPU seconds and those of
// the processes they ran.
type proxierCPU struct {
	nodes         int
	own, children float64
}

// readCPU reads dir's cpu-*.txt; a file it cannot read counts for nothing.
func readCPU(dir string) proxierCPU {
	var c proxierCPU
	files, _ := filepath.Glob(filepath.Join(dir, "cpu-*.txt"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var name string
		var pid int
		var own, children float64
		if _, err := fmt.Sscanf(string(b), "%s pid %d: own %f s, child processes %f s", &name, &pid, &own, &children); err == nil {
			c.nodes, c.own, c.children = c.nodes+1, c.own+own, c.children+children
		}
	}
	return c
}

// failureReason is the failure's message or, as ginkgo v2 leaves that
// empty, the "[FAILED] ..." line of its text.
func failureReason(message, text string) string {
	if message != "" {
		return message
	}
	for _, line := range strings.Split(text, "\n") {
		if r, ok := strings.CutPrefix(strings.TrimSpace(line), "[FAILED] "); ok {
			return r
		}
	}
	return strings.TrimSpace(text)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return strings.ReplaceAll(s, "|", `\|`)
}
