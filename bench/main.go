package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// record is one line of results.json.
type record struct {
	Proxier             string   `json:"proxier"`
	Scenario            string   `json:"scenario"`
	Services            int      `json:"services"`
	EndpointsPerService int      `json:"endpoints_per_service"`
	Samples             *int     `json:"samples"`
	P50ms               *float64 `json:"p50_ms"`
	P99ms               *float64 `json:"p99_ms"`
	CPUs                *float64 `json:"cpu_s"`
	RSSMB               *float64 `json:"rss_mb"`
	KernelObjectsOK     *bool    `json:"kernel_objects_ok"`
	// Cold start only: when default/kubernetes alone was fully programmed.
	KubernetesReadyMs *float64 `json:"kubernetes_ready_ms,omitempty"`
	Note              string   `json:"note,omitempty"`
}

func ptr[T any](v T) *T { return &v }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentiles returns p50 and p99 in milliseconds (nearest rank).
func percentiles(samples []time.Duration) (float64, float64) {
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return ms(rank(0.50)), ms(rank(0.99))
}

func progress(format string, args ...any) {
	fmt.Printf("bench %s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

type options struct {
	scales          []int
	perService      int
	changes         int
	proxiers        []string
	upstreamCap     time.Duration
	upstreamColdCap time.Duration
	out             string
}

func main() {
	var o options
	scales := flag.String("scales", "1000", "comma-separated Service counts")
	flag.IntVar(&o.perService, "endpoints", 10, "endpoints per Service")
	flag.IntVar(&o.changes, "changes", 100, "samples of the one-change scenario")
	proxiers := flag.String("proxiers", "floor,kube-ipvs-proxy,kube-proxy", "what to measure")
	flag.DurationVar(&o.upstreamCap, "upstream-cap", 3*time.Minute, "time cap per upstream kube-proxy scenario after its cold start")
	flag.DurationVar(&o.upstreamColdCap, "upstream-cold-cap", 8*time.Minute, "time cap for upstream kube-proxy's cold start")
	flag.StringVar(&o.out, "out", "", "results directory")
	render := flag.String("render", "", "only rewrite DIR/report.md from DIR/results.json")
	flag.Parse()
	if *render != "" {
		if err := rerender(*render); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	for _, s := range strings.Split(*scales, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: bad scale %q\n", s)
			os.Exit(2)
		}
		o.scales = append(o.scales, n)
	}
	o.proxiers = strings.Split(*proxiers, ",")
	if o.out == "" {
		fmt.Fprintln(os.Stderr, "bench: -out is required")
		os.Exit(2)
	}
	// The netlink ipset code logs every attribute it does not parse.
	log.SetOutput(io.Discard)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	env, err := framework.Load()
	if err != nil {
		return err
	}
	k, err := openKernel()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	var records []record
	for _, n := range o.scales {
		progress("[%d svc] creating API objects", n)
		if err := ensureObjects(env, n, o.perService, func(done int) { progress("[%d svc] %d services created", n, done) }); err != nil {
			return err
		}
		for _, name := range o.proxiers {
			if err := framework.CleanKernel(); err != nil {
				return err
			}
			var recs []record
			var err error
			if name == "floor" {
				recs, err = measureFloor(k, n, o)
			} else {
				recs, err = measureProxier(env, k, name, n, o)
			}
			if err != nil {
				return fmt.Errorf("%s at %d services: %w", name, n, err)
			}
			records = append(records, recs...)
			if err := writeResults(o.out, records); err != nil {
				return err
			}
		}
	}
	return framework.CleanKernel()
}

func measureFloor(k kernel, n int, o options) ([]record, error) {
	progress("[%d svc] floor: cold start", n)
	kube, all, err := floorColdStart(k, n, o.perService)
	if err != nil {
		return nil, err
	}
	ok, missing := k.complete(n, o.perService)
	cold := record{Proxier: "floor", Scenario: "cold-start", Services: n, EndpointsPerService: o.perService,
		Samples: ptr(1), P50ms: ptr(ms(all)), P99ms: ptr(ms(all)), KernelObjectsOK: ptr(ok),
		KubernetesReadyMs: ptr(ms(kube)), Note: missing}
	progress("[%d svc] floor: complete in %s", n, all.Round(time.Millisecond))
	lat, err := floorOneChange(k, n, o.changes)
	if err != nil {
		return nil, err
	}
	p50, p99 := percentiles(lat)
	one := record{Proxier: "floor", Scenario: "one-change", Services: n, EndpointsPerService: o.perService,
		Samples: ptr(len(lat)), P50ms: ptr(p50), P99ms: ptr(p99), KernelObjectsOK: ptr(true)}
	return []record{cold, one}, nil
}

func startProxier(env *framework.Env, name string) (*framework.Process, error) {
	switch name {
	case "kube-ipvs-proxy":
		return framework.StartOurs(env, "bench-kube-ipvs-proxy")
	case "kube-proxy":
		return framework.StartUpstream(env, "bench-kube-proxy")
	}
	return nil, fmt.Errorf("unknown proxier %q", name)
}

func measureProxier(env *framework.Env, k kernel, name string, n int, o options) ([]record, error) {
	coldCap, capDur := 30*time.Minute, 30*time.Minute
	if name == "kube-proxy" {
		coldCap, capDur = o.upstreamColdCap, o.upstreamCap
	}
	progress("[%d svc] %s: cold start", n, name)
	start := time.Now()
	p, err := startProxier(env, name)
	if err != nil {
		return nil, err
	}
	defer p.Stop()
	cold := record{Proxier: name, Scenario: "cold-start", Services: n, EndpointsPerService: o.perService, Samples: ptr(1)}
	var kubeAt time.Duration
	missing := ""
	var lastCheck time.Time
	for {
		if done, err := p.Exited(); done {
			return nil, fmt.Errorf("%s exited: %v (see %s)", name, err, p.LogPath)
		}
		since := time.Since(start)
		if kubeAt == 0 && k.kubernetesReady() && masqueradeRules() {
			kubeAt = since
			cold.KubernetesReadyMs = ptr(ms(kubeAt))
			progress("[%d svc] %s: default/kubernetes programmed after %s", n, name, kubeAt.Round(time.Millisecond))
		}
		// The full check is heavy; before default/kubernetes is ready it
		// only records progress every few seconds.
		if kubeAt != 0 || time.Since(lastCheck) > 3*time.Second {
			lastCheck = time.Now()
			ok, what := k.complete(n, o.perService)
			if ok && kubeAt != 0 {
				cold.P50ms, cold.P99ms, cold.KernelObjectsOK = ptr(ms(since)), ptr(ms(since)), ptr(true)
				progress("[%d svc] %s: complete after %s", n, name, since.Round(time.Millisecond))
				break
			}
			if ok {
				what = "default/kubernetes not fully programmed (VS, real server, VIP, ipsets, masquerade rules)"
			}
			missing = what
		}
		if since > coldCap {
			cold.KernelObjectsOK = ptr(false)
			cold.Note = fmt.Sprintf("not complete after %s: %s", coldCap, missing)
			progress("[%d svc] %s: %s", n, name, cold.Note)
			break
		}
		if kubeAt == 0 {
			time.Sleep(20 * time.Millisecond)
		} else {
			time.Sleep(250 * time.Millisecond)
		}
	}
	if u, err := p.Usage(); err == nil {
		cold.CPUs, cold.RSSMB = ptr(u.CPU.Seconds()), ptr(u.RSSMB)
	}
	if cold.KernelObjectsOK == nil || !*cold.KernelObjectsOK {
		return []record{cold}, nil
	}

	progress("[%d svc] %s: one change x%d", n, name, o.changes)
	one, err := oneChange(env, k, p, name, n, o, capDur)
	return []record{cold, one}, err
}

// changeSpacing separates one-change samples.
const changeSpacing = 1100 * time.Millisecond

// oneChange adds one endpoint to one Service at a time and times the write
// until the kernel has the new real server. The slices are restored after.
func oneChange(env *framework.Env, k kernel, p *framework.Process, name string, n int, o options, capDur time.Duration) (record, error) {
	rec := record{Proxier: name, Scenario: "one-change", Services: n, EndpointsPerService: o.perService, KernelObjectsOK: ptr(true)}
	before, _ := p.Usage()
	var lat []time.Duration
	changed := map[int]bool{}
	defer func() {
		for i := range changed {
			_ = env.Apply(benchSlice(i, o.perService))
		}
	}()
	scenarioStart := time.Now()
	for s := 0; s < o.changes && time.Since(scenarioStart) < capDur; s++ {
		i := (s * 7919) % n
		added := offset(extraBase, s)
		key := ipvs.Key{Address: serviceIP(i), Protocol: ipvs.TCP, Port: 80}
		changed[i] = true
		t0 := time.Now()
		if err := env.Apply(benchSlice(i, o.perService, added)); err != nil {
			return rec, err
		}
		for !k.hasReal(key, netip.AddrPortFrom(added, 8080)) {
			if time.Since(t0) > 5*time.Minute {
				rec.KernelObjectsOK = ptr(false)
				rec.Note = fmt.Sprintf("endpoint %s of %s not programmed after 5m", added, serviceName(i))
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		lat = append(lat, time.Since(t0))
		// Space the samples beyond the default --ipvs-min-sync-period (1s),
		// so that each measures one isolated change, not the rate limit.
		time.Sleep(changeSpacing)
	}
	if len(lat) < o.changes {
		rec.Note = strings.TrimSpace(rec.Note + fmt.Sprintf(" capped at %s: %d of %d samples", capDur, len(lat), o.changes))
	}
	rec.Samples = ptr(len(lat))
	if len(lat) > 0 {
		p50, p99 := percentiles(lat)
		rec.P50ms, rec.P99ms = ptr(p50), ptr(p99)
		progress("[%d svc] %s: one change p50 %.1f ms, p99 %.1f ms (%d samples)", n, name, p50, p99, len(lat))
	}
	if after, err := p.Usage(); err == nil {
		rec.CPUs, rec.RSSMB = ptr((after.CPU - before.CPU).Seconds()), ptr(after.RSSMB)
	}
	return rec, nil
}

func masqueradeRules() bool {
	out, err := framework.Output("iptables-save", "-t", "nat")
	return err == nil && strings.Contains(out, "-A KUBE-POSTROUTING") && strings.Contains(out, "-A KUBE-SERVICES")
}

func rerender(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	var records []record
	if err := json.Unmarshal(data, &records); err != nil {
		return err
	}
	return writeResults(dir, records)
}

func writeResults(dir string, records []record) error {
	data, err := json.MarshalIndent(records, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(report(records)), 0o644)
}
