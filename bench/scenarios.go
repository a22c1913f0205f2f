package main

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// session measures one proxier at one scale; its scenarios run in order on
// the same process, except restart, which replaces it.
type session struct {
	env *framework.Env
	// client writes the API objects: the apiserver's, or a fake clientset
	// the proxier reads in-process.
	client kubernetes.Interface
	k      kernel
	name   string
	n      int
	o      options
	// cap bounds each scenario after the cold start (upstream only).
	cap time.Duration
	p   *framework.Process
}

func (s *session) record(scenario string) record {
	return record{Proxier: s.name, Scenario: scenario, Services: s.n, EndpointsPerService: s.o.perService}
}

func (s *session) logf(format string, args ...any) {
	progress("[%d svc] %s: "+format, append([]any{s.n, s.name}, args...)...)
}

// profile saves a pprof profile of our proxier (it serves them with
// --profiling) under the results directory; upstream is not profiled.
func (s *session) profile(what, file string) {
	if !profiled(s.name) {
		return
	}
	dir := filepath.Join(s.o.out, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	data, err := fetch("http://127.0.0.1:10249/debug/pprof/"+what, 5*time.Minute)
	if err != nil {
		s.logf("profile %s: %v", what, err)
		return
	}
	ext := ".pb.gz"
	if strings.Contains(what, "debug=1") {
		ext = ".txt" // the text form, which ends with the runtime's memory statistics
	}
	_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d-%s%s", s.name, s.n, file, ext)), data, 0o644)
}

// keep writes a file for the record into the results directory, with any
// spaces and parentheses of a proxier's display name left out of its name.
func (s *session) keep(name string, data []byte) {
	name = strings.NewReplacer(" (", "-", ")", "", " ", "-").Replace(name)
	if err := os.WriteFile(filepath.Join(s.o.out, name), data, 0o644); err != nil {
		s.logf("keep %s: %v", name, err)
	}
}

// cpuProfiles records back-to-back CPU profiles until stop is closed.
func (s *session) cpuProfiles(file string, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	if !profiled(s.name) {
		return &wg
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			s.profile("profile?seconds=5", fmt.Sprintf("%s-cpu-%02d", file, i))
		}
	}()
	return &wg
}

// usage is the proxier process's, or this one's when it runs in-process.
func (s *session) usage() framework.Usage {
	if s.p == nil {
		u, _ := framework.SelfUsage()
		return u
	}
	u, _ := s.p.Usage()
	return u
}

// networkProgramming returns the proxier's own
// kubeproxy_network_programming_duration_seconds observations since before:
// the upper bounds, in milliseconds, of the buckets holding p50 and p99
// (kube-proxy's buckets start at 0.25 s, too coarse to interpolate in).
func networkProgramming(before series) (p50, p99 *float64) {
	after, err := scrape()
	if err != nil {
		return nil, nil
	}
	const name = "kubeproxy_network_programming_duration_seconds"
	h := after.histogram(name).since(before.histogram(name))
	if h.total() == 0 {
		return nil, nil
	}
	p50, p99 = ptr(1000*h.upperBound(0.50)), ptr(1000*h.upperBound(0.99))
	if math.IsInf(*p99, 1) {
		p99 = nil
	}
	return p50, p99
}

// triggered stamps a slice with the time of the change, as the EndpointSlice
// controller does, so the proxier's network programming metric covers it.
func triggered(s *discovery.EndpointSlice) *discovery.EndpointSlice {
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[v1.EndpointsLastChangeTriggerTime] = time.Now().Format(time.RFC3339Nano)
	return s
}

// putSlice writes a slice the bench owns, unconditionally: one request.
func (s *session) putSlice(sl *discovery.EndpointSlice) error {
	ctx, cancel := framework.Ctx()
	defer cancel()
	_, err := s.client.DiscoveryV1().EndpointSlices(sl.Namespace).Update(ctx, triggered(sl), metav1.UpdateOptions{})
	return err
}

// deleteService deletes a Service and its slices, as the garbage collector
// would.
func deleteService(client kubernetes.Interface, ns, name string) error {
	ctx, cancel := framework.Ctx()
	defer cancel()
	if err := client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return client.DiscoveryV1().EndpointSlices(ns).Delete(ctx, name+"-1", metav1.DeleteOptions{})
}

// change is one sample of the one-change scenario: API writes and the kernel
// state that shows they are programmed.
type change struct {
	kind  string
	write func() error
	done  func() bool
}

// changeSpacing separates one-change samples: beyond twice the default
// --ipvs-min-sync-period (1 s, burst 2, for both proxiers), so that a change
// of two API objects (a Service and its slice) is not held by the rate limit
// its predecessor used up. Each sample measures one isolated change.
const changeSpacing = 2100 * time.Millisecond

var extraServiceBase = netip.MustParseAddr("10.96.250.0")

// takesNew says whether virtual server key would take a new connection: it
// exists with a real server of weight above 0. A deleted Service's virtual
// server may stay while its connections drain (ours does), at weight 0, as
// hasReal counts a removed endpoint gone at weight 0.
func (s *session) takesNew(key ipvs.Key) bool {
	_, ok, err := s.k.ipvs.GetVirtualServer(key)
	if err != nil {
		return true // an error proves nothing gone
	}
	if !ok {
		return false
	}
	reals, err := s.k.ipvs.RealServers(key)
	return err != nil || slices.ContainsFunc(reals, func(r ipvs.RealServer) bool { return r.Weight > 0 })
}

// changeFor cycles through five kinds of change: an endpoint added to and
// removed from an existing Service, and a new Service added, its port
// modified and deleted.
func (s *session) changeFor(i int) change {
	svc := (i / 5 * 7919) % s.n
	key := ipvs.Key{Address: serviceIP(svc), Protocol: ipvs.TCP, Port: 80}
	added := netip.AddrPortFrom(offset(extraBase, i/5), 8080)
	x := i / 5
	name := fmt.Sprintf("extra-%03d", x)
	ip := offset(extraServiceBase, x).String()
	at := func(port int32) ipvs.Key {
		return ipvs.Key{Address: offset(extraServiceBase, x), Protocol: ipvs.TCP, Port: uint16(port)}
	}
	extraEP := netip.AddrPortFrom(offset(extraBase, 1000+x), 8080)
	extraSlice := func() *discovery.EndpointSlice {
		return framework.Slice(namespace, name, name+"-1",
			[]discovery.EndpointPort{framework.SlicePort("http", v1.ProtocolTCP, 8080)},
			framework.Endpoint(extraEP.Addr().String(), "other-node", true))
	}
	ctx := func() (context.Context, context.CancelFunc) { return framework.Ctx() }
	switch i % 5 {
	case 0:
		return change{"endpoint-add",
			func() error { return s.putSlice(benchSlice(svc, s.o.perService, added.Addr())) },
			func() bool { return s.k.hasReal(key, added) }}
	case 1:
		return change{"endpoint-remove",
			func() error { return s.putSlice(benchSlice(svc, s.o.perService)) },
			func() bool { return !s.k.hasReal(key, added) }}
	case 2:
		return change{"service-add",
			func() error {
				c, cancel := ctx()
				defer cancel()
				svc := framework.ClusterIPService(namespace, name, ip, framework.Port("http", v1.ProtocolTCP, 80, 8080))
				if _, err := s.client.CoreV1().Services(namespace).Create(c, svc, metav1.CreateOptions{}); err != nil {
					return err
				}
				_, err := s.client.DiscoveryV1().EndpointSlices(namespace).Create(c, triggered(extraSlice()), metav1.CreateOptions{})
				return err
			},
			func() bool { return s.k.hasReal(at(80), extraEP) }}
	case 3:
		return change{"service-modify",
			func() error {
				c, cancel := ctx()
				defer cancel()
				cur, err := s.client.CoreV1().Services(namespace).Get(c, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				cur.Spec.Ports[0].Port = 81
				_, err = s.client.CoreV1().Services(namespace).Update(c, cur, metav1.UpdateOptions{})
				return err
			},
			func() bool { return s.k.hasReal(at(81), extraEP) && !s.takesNew(at(80)) }}
	default:
		return change{"service-delete",
			func() error { return deleteService(s.client, namespace, name) },
			func() bool { return !s.takesNew(at(81)) }}
	}
}

// cleanExtras removes what an interrupted one-change run may have left.
func cleanExtras(client kubernetes.Interface) {
	ctx, cancel := framework.Ctx()
	defer cancel()
	list, err := client.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, svc := range list.Items {
		if strings.HasPrefix(svc.Name, "extra-") {
			_ = deleteService(client, namespace, svc.Name)
		}
	}
}

// oneChange times o.changes isolated changes, from the first API write until
// the kernel shows it, one record per kind of change and one for all.
func (s *session) oneChange() ([]record, error) {
	cleanExtras(s.client)
	before := s.usage()
	metricsBefore, _ := scrape()
	lat, afterWrite := map[string][]time.Duration{}, map[string][]time.Duration{}
	var all, allAfterWrite []time.Duration
	// Every sample, to line up with the proxier's log.
	csv := strings.Builder{}
	csv.WriteString("sent,change,ms,after_write_ms\n")
	var kinds []string
	note := ""
	stopProfiles := make(chan struct{})
	profiles := s.cpuProfiles("one", stopProfiles)
	defer func() { close(stopProfiles); profiles.Wait() }()
	start := time.Now()
	for i := 0; i < s.o.changes && time.Since(start) < s.cap; i++ {
		c := s.changeFor(i)
		if _, ok := lat[c.kind]; !ok {
			kinds = append(kinds, c.kind)
		}
		t0 := time.Now()
		if err := c.write(); err != nil {
			return nil, fmt.Errorf("%s: %w", c.kind, err)
		}
		written := time.Now()
		for !c.done() {
			if time.Since(t0) > 5*time.Minute {
				note = fmt.Sprintf("%s (sample %d) not programmed after 5m", c.kind, i)
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		d := time.Since(t0)
		lat[c.kind] = append(lat[c.kind], d)
		all = append(all, d)
		kernel := time.Since(written)
		afterWrite[c.kind] = append(afterWrite[c.kind], kernel)
		allAfterWrite = append(allAfterWrite, kernel)
		fmt.Fprintf(&csv, "%s,%s,%.1f,%.1f\n", t0.UTC().Format(time.RFC3339Nano), c.kind, ms(d), ms(kernel))
		if note != "" {
			break
		}
		// Space the samples beyond the default --ipvs-min-sync-period (1s),
		// so that each measures one isolated change, not the rate limit.
		time.Sleep(changeSpacing)
	}
	cleanExtras(s.client)
	s.keep(fmt.Sprintf("one-change-%s-%d.csv", s.name, s.n), []byte(csv.String()))
	if len(all) < s.o.changes && note == "" {
		note = fmt.Sprintf("capped at %s: %d of %d samples", s.cap, len(all), s.o.changes)
	}
	after := s.usage()
	rec := s.record("one-change")
	rec.Change = "all"
	rec.Samples = ptr(len(all))
	rec.KernelObjectsOK = ptr(!strings.Contains(note, "not programmed"))
	rec.Note = note
	rec.CPUs, rec.RSSMB = ptr((after.CPU - before.CPU).Seconds()), ptr(after.RSSMB)
	if metricsBefore != nil {
		rec.MetricP50ms, rec.MetricP99ms = networkProgramming(metricsBefore)
	}
	if len(all) == 0 {
		return []record{rec}, nil
	}
	setLatencies(&rec, all, allAfterWrite)
	s.logf("one change p50 %.1f ms, p99 %.1f ms; after the API write %.1f / %.1f ms (%d samples)",
		*rec.P50ms, *rec.P99ms, *rec.AfterWriteP50ms, *rec.AfterWriteP99ms, len(all))
	out := []record{rec}
	for _, kind := range kinds {
		r := s.record("one-change")
		r.Change = kind
		r.Samples = ptr(len(lat[kind]))
		setLatencies(&r, lat[kind], afterWrite[kind])
		out = append(out, r)
	}
	return out, nil
}

// setLatencies fills a one-change record's percentiles: from the API write
// sent, from its answer, and of the answer itself (the two samples' gap).
func setLatencies(r *record, fromSent, fromWritten []time.Duration) {
	p50, p99 := percentiles(fromSent)
	r.P50ms, r.P99ms = ptr(p50), ptr(p99)
	p50, p99 = percentiles(fromWritten)
	r.AfterWriteP50ms, r.AfterWriteP99ms = ptr(p50), ptr(p99)
	answers := make([]time.Duration, len(fromSent))
	for i := range fromSent {
		answers[i] = fromSent[i] - fromWritten[i]
	}
	p50, p99 = percentiles(answers)
	r.AnswerP50ms, r.AnswerP99ms = ptr(p50), ptr(p99)
}

// syncCount is how many full syncs the proxier has done. Ours counts drift
// checks apart from partial syncs; every upstream IPVS sync is a full one.
func syncCount(m series) float64 {
	if v, ok := fullSyncs(m); ok {
		return v
	}
	return m.value("kubeproxy_sync_proxy_rules_duration_seconds_count")
}

// fullSyncs is our proxier's count of drift checks; false for upstream's,
// which has none. Ours observes each sync under every IP family it runs,
// so its IPv4 series (every node has IPv4) counts each once; older builds
// had no ip_family.
func fullSyncs(m series) (float64, bool) {
	const name = "kubeproxy_sync_full_proxy_rules_duration_seconds_count"
	for _, k := range []string{name + `{ip_family="IPv4"}`, name} {
		if v, ok := m[k]; ok {
			return v, true
		}
	}
	return 0, false
}

// steadySync measures CPU per periodic sync with no changes: once the
// changes of earlier scenarios are done and a full sync has run, the process's
// CPU over steadyPeriods default sync periods (30 s), without touching the
// proxier, divided by their number; idle time between syncs counts. Full
// syncs are not counted one by one: upstream runs an IPv4 and an IPv6
// proxier on a dual-stack kernel, and syncCount sums both families' series.
func (s *session) steadySync() record {
	rec := s.record("steady-sync")
	deadline := time.Now().Add(max(s.cap, 3*time.Minute))
	poll := func(done func(series) bool) bool {
		for time.Now().Before(deadline) {
			if m, err := scrape(); err == nil && done(m) {
				return true
			}
			time.Sleep(time.Second)
		}
		return false
	}
	quiet := poll(func(m series) bool {
		return m.value("kubeproxy_sync_proxy_rules_endpoint_changes_pending") == 0 &&
			m.value("kubeproxy_sync_proxy_rules_service_changes_pending") == 0
	})
	c0 := syncCount(mustScrape())
	if !quiet || !poll(func(m series) bool { return syncCount(m) > c0 }) {
		rec.Note = "no full sync without pending changes before the cap"
		return rec
	}
	m0, before := mustScrape(), s.usage()
	// One profile over the window: the profiler's own cost stays small
	// next to what is measured.
	var profiling sync.WaitGroup
	if profiled(s.name) {
		profiling.Go(func() {
			s.profile(fmt.Sprintf("profile?seconds=%d", steadyPeriods*30-5), "steady-cpu-00")
		})
	}
	time.Sleep(steadyPeriods * 30 * time.Second)
	after, m1 := s.usage(), mustScrape()
	profiling.Wait()
	rec.RSSMB = ptr(after.RSSMB)
	cpu := (after.CPU - before.CPU).Seconds()
	rec.CPUs = ptr(cpu / steadyPeriods)
	syncs := syncCount(m1) - syncCount(m0)
	rec.Samples = ptr(int(syncs))
	if _, ours := fullSyncs(m1); ours && syncs > 0 {
		h := m1.histogram("kubeproxy_sync_full_proxy_rules_duration_seconds").since(m0.histogram("kubeproxy_sync_full_proxy_rules_duration_seconds"))
		rec.P50ms, rec.P99ms = ptr(1000*h.quantile(0.5)), ptr(1000*h.quantile(0.99))
	}
	rec.Note = fmt.Sprintf("%.2f CPU s over %d sync periods (%d syncs observed)", cpu, steadyPeriods, int(syncs))
	s.logf("steady: %.2f CPU s per sync period", *rec.CPUs)
	s.profile("heap", "steady-heap")
	s.profile("heap?debug=1", "steady-memstats")
	return rec
}

// steadyPeriods is how many default --ipvs-sync-period (30 s) the steady
// state is measured over: several, so that where the window starts between
// two syncs matters little.
const steadyPeriods = 3

func mustScrape() series {
	m, _ := scrape()
	return m
}

// restart stops the proxier and starts a new one on the full kernel, timing
// until the new one reports a sync, and watches that nothing it programmed
// goes missing meanwhile: every kube-ipvs0 address (netlink events) and a
// sample of virtual servers, real servers and ipset entries (polled).
func (s *session) restart() (record, error) {
	rec := s.record("restart")
	sample := s.restartSample()
	stopWatch := make(chan struct{})
	var missing []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for _, m := range watchAddressRemovals(stopWatch) {
			mu.Lock()
			missing = append(missing, m)
			mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopWatch:
				return
			default:
			}
			for _, check := range sample {
				if what := check(); what != "" {
					mu.Lock()
					missing = append(missing, what)
					mu.Unlock()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	if err := s.p.Stop(); err != nil {
		return rec, err
	}
	start := time.Now()
	p, err := startProxier(s.env, s.name, s.o)
	if err != nil {
		close(stopWatch)
		wg.Wait()
		return rec, err
	}
	s.p = p
	stopProfiles := make(chan struct{})
	profiles := s.cpuProfiles("restart", stopProfiles)
	err = framework.WaitSynced(p, start, max(s.cap, 10*time.Minute))
	synced := time.Since(start)
	close(stopProfiles)
	profiles.Wait()
	time.Sleep(2 * time.Second) // anything removed late would show now
	close(stopWatch)
	wg.Wait()
	if err != nil {
		rec.Note = err.Error()
		rec.KernelObjectsOK = ptr(false)
		return rec, nil
	}
	u := s.usage()
	rec.Samples, rec.P50ms, rec.P99ms = ptr(1), ptr(ms(synced)), ptr(ms(synced))
	rec.CPUs, rec.RSSMB = ptr(u.CPU.Seconds()), ptr(u.RSSMB)
	rec.KernelObjectsOK = ptr(len(missing) == 0)
	rec.Note = fmt.Sprintf("%d objects seen missing (all addresses watched, %d objects polled)", len(missing), len(sample))
	if len(missing) > 0 {
		rec.Note += ", e.g. " + missing[0]
	}
	if m, err := scrape(); err == nil {
		if ops, ok := m["kube_ipvs_proxy_kernel_operations_total"]; ok {
			rec.Note += fmt.Sprintf("; %d kernel writes by the new process", int(ops))
		}
	}
	s.logf("restart: synced after %s; %s", synced.Round(time.Millisecond), rec.Note)
	return rec, nil
}

// restartSample returns checks for default/kubernetes and up to 20 other
// Services: each says what is missing, or "".
func (s *session) restartSample() []func() string {
	type svc struct {
		key   ipvs.Key
		reals []netip.AddrPort
	}
	list := []svc{{kubeKey, []netip.AddrPort{kubeReal}}}
	for i := 0; i < s.n; i += max(1, s.n/20) {
		var reals []netip.AddrPort
		for j := 0; j < s.o.perService; j++ {
			reals = append(reals, netip.AddrPortFrom(endpointIP(i, j, s.o.perService), 8080))
		}
		list = append(list, svc{ipvs.Key{Address: serviceIP(i), Protocol: ipvs.TCP, Port: 80}, reals})
	}
	var checks []func() string
	for _, v := range list {
		checks = append(checks, func() string {
			if _, ok, err := s.k.ipvs.GetVirtualServer(v.key); err == nil && !ok {
				return "virtual server " + v.key.String()
			}
			got, err := s.k.ipvs.RealServers(v.key)
			if err != nil {
				return "real servers of " + v.key.String() + ": " + err.Error()
			}
			have := map[netip.AddrPort]bool{}
			for _, r := range got {
				if r.Weight > 0 {
					have[r.ID()] = true
				}
			}
			for _, r := range v.reals {
				if !have[r] {
					return fmt.Sprintf("real server %s of %s", r, v.key)
				}
			}
			entry := ipset.Entry{IP: v.key.Address, Protocol: ipset.EntryTCP, Port: v.key.Port}
			if ok, err := s.k.sets.Has("KUBE-CLUSTER-IP", entry); err != nil || !ok {
				return "KUBE-CLUSTER-IP " + entry.String()
			}
			return ""
		})
	}
	return checks
}
