package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
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
	// Cold start only: when default/kubernetes alone was fully programmed,
	// from the start and from the proxier's log line saying its informer
	// caches were synced.
	KubernetesReadyMs          *float64 `json:"kubernetes_ready_ms,omitempty"`
	KubernetesReadyAfterSyncMs *float64 `json:"kubernetes_ready_after_sync_ms,omitempty"`
	// Cold start only: when the state was complete, from that log line —
	// the proxier's own work once it had the objects, which is what the
	// floor does (for the floor, its whole cold start).
	CompleteAfterSyncMs *float64 `json:"complete_after_sync_ms,omitempty"`
	// One change only: the kind of change ("all" for every sample); big
	// Service only: the phase.
	Change string `json:"change,omitempty"`
	// The proxier's own kubeproxy_network_programming_duration_seconds over
	// the scenario (histogram buckets, interpolated).
	MetricP50ms *float64 `json:"metric_p50_ms,omitempty"`
	MetricP99ms *float64 `json:"metric_p99_ms,omitempty"`
	// One change only: from the moment the API write returned (the object is
	// stored) until the kernel showed it. p50_ms/p99_ms count from the moment
	// the write was sent, so they include the apiserver's own time, which at
	// 50k Services is O(cluster) for a Service create or delete (kube-apiserver
	// 1.34 lists every IPAddress to update its allocator metrics).
	AfterWriteP50ms *float64 `json:"after_write_p50_ms,omitempty"`
	AfterWriteP99ms *float64 `json:"after_write_p99_ms,omitempty"`
	// One change only: from the write sent until its answer, the apiserver's
	// part. Every sample's total is at least its answer, so no proxier's p99
	// from the request can be below this p99.
	AnswerP50ms *float64 `json:"answer_p50_ms,omitempty"`
	AnswerP99ms *float64 `json:"answer_p99_ms,omitempty"`
	// Big Service only (one record per phase, in Change): how long the
	// big Service took to be in, or gone from, the kernel; the slowest
	// other change; the proxier's longest sync meanwhile.
	BigServiceMs  *float64 `json:"big_service_ms,omitempty"`
	MaxMs         *float64 `json:"max_ms,omitempty"`
	LongestSyncMs *float64 `json:"longest_sync_ms,omitempty"`
	Note          string   `json:"note,omitempty"`
	// Mix is the Services' mix: "" for ClusterIPs alone, "mixed" or "dual".
	Mix string `json:"mix,omitempty"`
	// Run is the run a merged baseline's record came from (see merge).
	Run string `json:"run,omitempty"`
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
	churnRate       int
	churnDuration   time.Duration
	scenarios       map[string]bool
	out             string
	// oursFlags are extra command-line flags for kube-ipvs-proxy, e.g. to
	// try a longer --ipvs-sync-period.
	oursFlags []string
	// mix is the Services' mix (see shapeOf).
	mix string
}

// wants says whether a scenario was asked for; the cold start always runs,
// every other scenario needs its state.
func (o options) wants(scenario string) bool {
	return scenario == "cold-start" || o.scenarios[scenario]
}

func main() {
	var o options
	scales := flag.String("scales", "1000", "comma-separated Service counts")
	flag.IntVar(&o.perService, "endpoints", 10, "endpoints per Service")
	flag.IntVar(&o.changes, "changes", 100, "samples of the one-change scenario")
	proxiers := flag.String("proxiers", "floor,kube-ipvs-proxy,kube-proxy,fake",
		"what to measure (fake: ours in-process, fed by a fake clientset)")
	flag.DurationVar(&o.upstreamCap, "upstream-cap", 3*time.Minute, "time cap per upstream kube-proxy scenario after its cold start")
	flag.DurationVar(&o.upstreamColdCap, "upstream-cold-cap", 8*time.Minute, "time cap for upstream kube-proxy's cold start")
	flag.IntVar(&o.churnRate, "churn-rate", 100, "endpoint changes per second in the churn scenario")
	flag.DurationVar(&o.churnDuration, "churn-duration", time.Minute, "length of the churn scenario")
	flag.StringVar(&o.out, "out", "", "results directory")
	scenarios := flag.String("scenarios", "cold-start,one-change,churn,steady-sync,ipvs-stats,restart",
		"scenarios to run (the cold start always runs: the others need its state); big-service only when asked")
	oursFlags := flag.String("ours-flags", "", "extra space-separated flags for kube-ipvs-proxy")
	flag.StringVar(&o.mix, "mix", "", `the Services' mix: empty for ClusterIPs alone, "mixed" (NodePorts, LoadBalancers, external IPs; see bench/mix.go) or "dual" (dual-stack ClusterIPs; see bench/dual.go)`)
	render := flag.String("render", "", "only rewrite DIR/report.md from DIR/results.json")
	mergeInto := flag.String("merge", "", "only merge the results of the runs given as arguments into DIR (make bench-baseline)")
	create := flag.Int("create", 0, "only create the API objects for this many Services, from the host (under testcluster, before the VM starts)")
	child := flag.String("child", "", "internal: measure the one proxier at the one scale given and write its records to this file")
	flag.Parse()
	if *render != "" {
		if err := rerender(*render); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *mergeInto != "" {
		if err := merge(*mergeInto, flag.Args()); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *create > 0 {
		if err := createMixFromHost(*create, o.perService, o.mix); err != nil {
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
		if o.mix == mixMixed && n > mixMax {
			fmt.Fprintf(os.Stderr, "bench: the mixed scenario has node ports for %d Services at most, not %d\n", mixMax, n)
			os.Exit(2)
		}
		o.scales = append(o.scales, n)
	}
	if o.mix != "" && o.mix != mixMixed && o.mix != mixDual {
		fmt.Fprintf(os.Stderr, "bench: unknown -mix %q (empty, %q or %q)\n", o.mix, mixMixed, mixDual)
		os.Exit(2)
	}
	o.proxiers = strings.Split(*proxiers, ",")
	o.oursFlags = strings.Fields(*oursFlags)
	o.scenarios = map[string]bool{}
	for _, sc := range strings.Split(*scenarios, ",") {
		o.scenarios[strings.TrimSpace(sc)] = true
	}
	if o.out == "" {
		fmt.Fprintln(os.Stderr, "bench: -out is required")
		os.Exit(2)
	}
	// The netlink ipset code logs every attribute it does not parse.
	log.SetOutput(io.Discard)
	if *child != "" {
		if err := runChild(o, *child); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run measures each proxier at each scale, each in a child process of its
// own on a kernel whose IPVS module was reloaded: see reloadIPVS.
func run(o options) error {
	env, err := framework.Load()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if err := addNodeAddrs(o.mix); err != nil {
		return err
	}
	if _, err := os.Stat("/proc/net/if_inet6"); err != nil && o.mix == mixDual {
		return fmt.Errorf("the dual-stack mix needs IPv6 in the kernel: %w", err)
	}
	var records []record
	for _, n := range o.scales {
		progress("[%d svc] creating API objects", n)
		if err := ensureObjects(env, n, o.perService, o.mix, func(done int) { progress("[%d svc] %d services created", n, done) }); err != nil {
			return err
		}
		if err := ensureMixObjects(env, n, o.perService, o.mix); err != nil {
			return err
		}
		for _, name := range o.proxiers {
			if err := framework.CleanKernel(); err != nil {
				return err
			}
			if err := reloadIPVS(); err != nil {
				progress("[%d svc] %v; the next cold start may pay for the last one's deletions", n, err)
			}
			recs, err := measureInChild(n, name, o)
			for i := range recs {
				recs[i].Mix = o.mix
			}
			records = append(records, recs...)
			if err != nil {
				// One proxier failing must not lose the rest of a long run.
				progress("[%d svc] %s FAILED: %v", n, name, err)
				records = append(records, record{Proxier: name, Scenario: "error", Services: n,
					EndpointsPerService: o.perService, Note: err.Error(), Mix: o.mix})
			}
			if err := writeResults(o.out, records); err != nil {
				return err
			}
		}
	}
	return framework.CleanKernel()
}

// measureInChild runs this program again for one proxier at one scale: the
// reloaded IPVS module has a new generic netlink family id, which the
// kernel handles opened at the start of a process resolved once.
func measureInChild(n int, name string, o options) ([]record, error) {
	path := filepath.Join(o.out, fmt.Sprintf(".records-%d-%s.json", n, strings.ReplaceAll(name, " ", "_")))
	defer os.Remove(path)
	args := append(os.Args[1:], "-scales", strconv.Itoa(n), "-proxiers", name, "-child", path)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	runErr := cmd.Run()
	var recs []record
	if data, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(data, &recs); err != nil {
			return nil, fmt.Errorf("records of %s: %w", name, err)
		}
	}
	if runErr != nil && len(recs) == 0 {
		return nil, fmt.Errorf("%s: %w", name, runErr)
	}
	return recs, nil
}

// runChild measures one proxier at one scale and writes its records,
// including a failure's, to path.
func runChild(o options, path string) error {
	env, err := framework.Load()
	if err != nil {
		return err
	}
	k, err := openKernel()
	if err != nil {
		return err
	}
	n, name := o.scales[0], o.proxiers[0]
	var recs []record
	switch name {
	case "floor":
		recs, err = measureFloor(env, k, n, o)
	case "fake":
		recs, err = measureFake(k, n, o)
	default:
		recs, err = measureProxier(env, k, name, n, o)
	}
	if err != nil {
		recs = append(recs, record{Proxier: name, Scenario: "error", Services: n,
			EndpointsPerService: o.perService, Note: err.Error()})
	}
	data, jerr := json.Marshal(recs)
	if jerr != nil {
		return jerr
	}
	return os.WriteFile(path, data, 0o644)
}

func measureFloor(env *framework.Env, k kernel, n int, o options) ([]record, error) {
	progress("[%d svc] floor: cold start", n)
	kube, all, addresses, err := floorColdStart(k, n, o.perService, o.mix)
	if err != nil {
		return nil, err
	}
	ok, missing := k.complete(n, o.perService, o.mix, false)
	note := fmt.Sprintf("%d VIP addresses on kube-ipvs0: %s of it", wantedObjects(n, o.mix).addresses, addresses.Round(time.Millisecond))
	if route, err := floorLocalRoute(k); err != nil {
		note += "; " + err.Error()
	} else {
		note += fmt.Sprintf("; one local route for %s instead: %s", serviceRange, route.Round(time.Microsecond))
		if o.mix == mixDual {
			note += " (for the IPv4 addresses)"
		}
	}
	if missing != "" {
		note = missing + "; " + note
	}
	cold := record{Proxier: "floor", Scenario: "cold-start", Services: n, EndpointsPerService: o.perService,
		Samples: ptr(1), P50ms: ptr(ms(all)), P99ms: ptr(ms(all)), CompleteAfterSyncMs: ptr(ms(all)), KernelObjectsOK: ptr(ok),
		KubernetesReadyMs: ptr(ms(kube)), Note: note}
	progress("[%d svc] floor: complete in %s", n, all.Round(time.Millisecond))
	recs := []record{cold}
	if o.wants("one-change") {
		progress("[%d svc] floor: one change x%d", n, o.changes)
		fromSent, fromWritten, err := floorOneChange(env, k, n, o.perService, o.changes)
		if err != nil {
			return recs, err
		}
		one := record{Proxier: "floor", Scenario: "one-change", Change: "all", Services: n, EndpointsPerService: o.perService,
			Samples: ptr(len(fromSent)), KernelObjectsOK: ptr(true),
			Note: "API write, watch event, one netlink call; endpoint add/remove"}
		setLatencies(&one, fromSent, fromWritten)
		recs = append(recs, one)
	}
	if o.wants("big-service") {
		progress("[%d svc] floor: big Service", n)
		big, err := floorBigService(env, k, n, o.perService)
		recs = append(recs, big...)
		if err != nil {
			return recs, err
		}
	}
	return recs, nil
}

// beforeName is kube-ipvs-proxy built from an earlier commit (make bench
// BENCH_BEFORE=<rev>), measured beside the current one in the same run.
const beforeName = "kube-ipvs-proxy-before"

// profiled says whether a proxier is profiled: ours, the code before
// included, so that the two carry the same cost of being measured.
func profiled(name string) bool { return name == "kube-ipvs-proxy" || name == beforeName }

// routed says whether this session's proxier is ours in
// --ipvs-vip-mode=local-route (given by -ours-flags).
func (s *session) routed() bool {
	return profiled(s.name) && strings.Contains(strings.Join(s.o.oursFlags, " "), "local-route")
}

// oursBenchFlags: profiled, and JSON logs, whose sync lines parseSyncs reads
// whichever version wrote them.
var oursBenchFlags = []string{"--profiling", "--logging-format=json"}

func startProxier(env *framework.Env, name string, o options) (*framework.Process, error) {
	switch name {
	case "kube-ipvs-proxy":
		return framework.StartOurs(env, "bench-kube-ipvs-proxy", append(oursBenchFlags, o.oursFlags...)...)
	case beforeName:
		return framework.Start(env, "bench-"+beforeName, filepath.Join(env.Bin, beforeName),
			framework.OursArgs(env, append(oursBenchFlags, o.oursFlags...)...)...)
	case "kube-proxy":
		return framework.StartUpstream(env, "bench-kube-proxy")
	}
	return nil, fmt.Errorf("unknown proxier %q", name)
}

// measureProxier runs every scenario on one proxier: cold start, one change,
// churn, steady state, restart and, when asked, the big Service. After a
// failed cold start the rest is skipped.
func measureProxier(env *framework.Env, k kernel, name string, n int, o options) ([]record, error) {
	s := &session{env: env, client: env.Admin, k: k, name: name, n: n, o: o, cap: 30 * time.Minute}
	if name == "kube-proxy" {
		s.cap = o.upstreamCap
	}
	cold, err := s.coldStart()
	if s.p != nil {
		defer func() {
			_ = s.p.Stop()
			// Its log, for the record: syncs and drift checks, timed.
			if data, err := os.ReadFile(s.p.LogPath); err == nil {
				s.keep(fmt.Sprintf("%s-%d.log", name, n), data)
			}
		}()
	}
	if err != nil || cold.KernelObjectsOK == nil || !*cold.KernelObjectsOK {
		return []record{cold}, err
	}
	recs := []record{cold}
	if o.wants("one-change") {
		s.logf("one change x%d", o.changes)
		one, err := s.oneChange()
		recs = append(recs, one...)
		if err != nil {
			return recs, err
		}
	}
	if o.wants("churn") {
		s.logf("churn: %d/s for %s", o.churnRate, o.churnDuration)
		churn, err := s.churn()
		recs = append(recs, churn)
		if err != nil {
			return recs, err
		}
	}
	if o.wants("steady-sync") {
		s.logf("steady state")
		recs = append(recs, s.steadySync())
	}
	if o.wants("ipvs-stats") && name == "kube-ipvs-proxy" {
		recs = append(recs, s.ipvsStats())
	}
	if o.wants("restart") {
		s.logf("restart")
		rs, err := s.restart()
		recs = append(recs, rs)
		if err != nil {
			return recs, err
		}
	}
	if !o.wants("big-service") {
		return recs, nil
	}
	// Last: the big Service's deletion leaves 180k real servers in the
	// kernel's dest trash for minutes (see reloadIPVS).
	if name == "kube-proxy" {
		r := s.record("big-service")
		r.Change = "program"
		r.Note = "not measured: upstream fills its ipsets one process per entry (10k Services are not complete after 8 min) and stops at 65,536 entries a set"
		return append(recs, r), nil
	}
	s.logf("big Service")
	big, err := s.bigService()
	return append(recs, big...), err
}

// completion decides when a cold start is complete without disturbing it:
// the full check lists every object, and at 10k Services it holds the IPVS,
// rtnl and ipset locks the proxier is writing under. So it runs only once the proxier's metrics say
// it has finished a sync, and then at most 10% of the time.
type completion struct {
	k             kernel
	n, perService int
	mix           string
	routed        bool // see kernel.complete
	next          time.Time
}

// poll says whether the kernel is complete, and since when: the moment the
// proxier's sync was seen, if the check then confirms it.
func (c *completion) poll(start time.Time) (bool, time.Duration) {
	seen := time.Since(start)
	if time.Now().Before(c.next) || !syncedSince(start) {
		return false, 0
	}
	t0 := time.Now()
	ok, _ := c.k.complete(c.n, c.perService, c.mix, c.routed)
	c.next = time.Now().Add(10 * time.Since(t0))
	return ok, seen
}

// syncedSince says whether the proxier serving metrics reports a sync after t.
func syncedSince(t time.Time) bool {
	m, err := scrape()
	if err != nil {
		return false
	}
	for k, v := range m {
		if strings.HasPrefix(k, "kubeproxy_sync_proxy_rules_last_timestamp_seconds") && v >= float64(t.Unix()) {
			return true
		}
	}
	return false
}

// coldStart starts the proxier with every object present and times until
// default/kubernetes alone, and then everything, is programmed.
func (s *session) coldStart() (record, error) {
	coldCap := 30 * time.Minute
	if s.name == "kube-proxy" {
		coldCap = s.o.upstreamColdCap
	}
	s.logf("cold start")
	start := time.Now()
	p, err := startProxier(s.env, s.name, s.o)
	if err != nil {
		return record{}, err
	}
	s.p = p
	stopProfiles := make(chan struct{})
	profiles := s.cpuProfiles("cold", stopProfiles)
	defer func() { close(stopProfiles); profiles.Wait() }()
	cold := s.record("cold-start")
	cold.Samples = ptr(1)
	var kubeAt time.Duration
	check := completion{k: s.k, n: s.n, perService: s.o.perService, mix: s.o.mix, routed: s.routed()}
	for {
		if done, err := p.Exited(); done {
			return cold, fmt.Errorf("%s exited: %v (see %s)", s.name, err, p.LogPath)
		}
		since := time.Since(start)
		// Until default/kubernetes is ready only it is checked, cheaply and
		// often; the full check lists every object.
		if kubeAt == 0 && s.k.kubernetesReady() && masqueradeRules() {
			kubeAt = since
			cold.KubernetesReadyMs = ptr(ms(kubeAt))
			s.logf("default/kubernetes programmed after %s", kubeAt.Round(time.Millisecond))
		}
		if kubeAt != 0 {
			if done, at := check.poll(start); done {
				cold.P50ms, cold.P99ms, cold.KernelObjectsOK = ptr(ms(at)), ptr(ms(at)), ptr(true)
				s.logf("complete after %s", at.Round(time.Millisecond))
				break
			}
		}
		if since > coldCap {
			_, missing := s.k.complete(s.n, s.o.perService, s.o.mix, s.routed())
			if kubeAt == 0 {
				missing = strings.TrimPrefix(missing+"; ", "; ") + "default/kubernetes not fully programmed (VS, real server, VIP, ipsets, masquerade rules)"
			}
			cold.KernelObjectsOK = ptr(false)
			cold.Note = fmt.Sprintf("not complete after %s: %s", coldCap, missing)
			s.logf("%s", cold.Note)
			break
		}
		if kubeAt == 0 {
			time.Sleep(20 * time.Millisecond)
		} else {
			time.Sleep(250 * time.Millisecond)
		}
	}
	if synced, ok := cachesSyncedAt(p.LogPath, start); ok {
		if kubeAt != 0 {
			cold.KubernetesReadyAfterSyncMs = ptr(ms(start.Add(kubeAt).Sub(synced)))
		}
		if cold.KernelObjectsOK != nil && *cold.KernelObjectsOK {
			cold.CompleteAfterSyncMs = ptr(*cold.P99ms - ms(synced.Sub(start)))
		}
	}
	u := s.usage()
	cold.CPUs, cold.RSSMB = ptr(u.CPU.Seconds()), ptr(u.RSSMB)
	s.profile("heap", "heap")
	return cold, nil
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
	// With several mixes, the plots show the first (see report).
	var plotted []record
	if mixes := mixesOf(records); len(mixes) > 0 {
		for _, r := range records {
			if r.Mix == mixes[0] {
				plotted = append(plotted, r)
			}
		}
	}
	plots, err := writePlots(dir, plotted)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.md"), []byte(report(records, plots)), 0o644)
}
