package main

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// The big-service scenario (-scenarios big-service, not in the default
// list): on the cold start's state, one Service with 300 TCP ports and 300
// external IPs, 300 × (1 + 300) = 90,300 virtual servers on every node, is
// added and later deleted while ordinary Services change beside it. It asks
// whether one Service that large delays the others' changes by more than
// one sync, which is what an opt-in per-Service limit would guard against.

// bigShape is the big Service's size; its endpoints are the ones from
// bigEndpointBase+firstEndpoint on.
type bigShape struct{ ports, externalIPs, endpoints, firstEndpoint int }

var bigDefault = bigShape{ports: 300, externalIPs: 300, endpoints: 2}

// moved is b after a rolling update's step: its first endpoint replaced by
// a new one, a real server added and one removed on every virtual server.
func (b bigShape) moved() bigShape {
	b.firstEndpoint++
	return b
}

func (b bigShape) endpoint(j int) netip.Addr { return offset(bigEndpointBase, b.firstEndpoint+j) }

const (
	bigName      = "big"
	bigFirstPort = 10000
)

var (
	// bigClusterIP is in the apiserver's 10.96.0.0/16, above serviceIP of
	// 50k Services and below extraServiceBase.
	bigClusterIP = netip.MustParseAddr("10.96.240.1")
	// The external IPs and endpoints take ranges no other scenario uses
	// and no node has (the mix's are 10.250 and 10.251).
	bigExternalBase = netip.MustParseAddr("10.252.0.0")
	bigEndpointBase = netip.MustParseAddr("10.253.0.1")
	// bigOtherBase is where the endpoints added to ordinary Services
	// meanwhile live.
	bigOtherBase = netip.MustParseAddr("10.201.0.0")
)

// port is the big Service's p-th port; each targets the same number.
func (b bigShape) port(p int) uint16 { return uint16(bigFirstPort + p) }

func (b bigShape) addresses() []netip.Addr {
	out := []netip.Addr{bigClusterIP}
	for i := 0; i < b.externalIPs; i++ {
		out = append(out, offset(bigExternalBase, i))
	}
	return out
}

func (b bigShape) service() *v1.Service {
	ports := make([]v1.ServicePort, b.ports)
	for p := range ports {
		n := int32(b.port(p))
		ports[p] = framework.Port(fmt.Sprintf("p%d", n), v1.ProtocolTCP, n, n)
	}
	svc := framework.ClusterIPService(namespace, bigName, bigClusterIP.String(), ports...)
	for _, a := range b.addresses()[1:] {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, a.String())
	}
	return svc
}

func (b bigShape) slice() *discovery.EndpointSlice {
	ports := make([]discovery.EndpointPort, b.ports)
	for p := range ports {
		n := int32(b.port(p))
		ports[p] = framework.SlicePort(fmt.Sprintf("p%d", n), v1.ProtocolTCP, n)
	}
	var eps []discovery.Endpoint
	for j := 0; j < b.endpoints; j++ {
		eps = append(eps, framework.Endpoint(b.endpoint(j).String(), "other-node", true))
	}
	return framework.Slice(namespace, bigName, bigName+"-1", ports, eps...)
}

// objects are the big Service's kernel objects, as objectsOf lists an
// ordinary Service's: a virtual server per address and port, each address
// on kube-ipvs0 and in KUBE-IPVS-IPS, an entry per virtual server in
// KUBE-CLUSTER-IP or KUBE-EXTERNAL-IP.
func (b bigShape) objects() kernelObjects {
	var o kernelObjects
	for i, a := range b.addresses() {
		set := "KUBE-EXTERNAL-IP"
		if i == 0 {
			set = "KUBE-CLUSTER-IP"
		}
		o.addresses = append(o.addresses, a)
		o.entries = append(o.entries, benchEntry{"KUBE-IPVS-IPS", ipset.Entry{IP: a}})
		for p := 0; p < b.ports; p++ {
			key := ipvs.Key{Address: a, Protocol: ipvs.TCP, Port: b.port(p)}
			o.virtualServers = append(o.virtualServers, key)
			o.entries = append(o.entries, benchEntry{set, ipset.Entry{IP: a, Protocol: ipset.EntryTCP, Port: key.Port}})
		}
	}
	return o
}

// reals are a big virtual server's real servers: every endpoint, on the
// virtual server's port.
func (b bigShape) reals(k ipvs.Key) []netip.AddrPort {
	out := make([]netip.AddrPort, b.endpoints)
	for j := range out {
		out[j] = netip.AddrPortFrom(b.endpoint(j), k.Port)
	}
	return out
}

// bigSample is one change to an ordinary Service while the big one is
// programmed, held or deleted.
type bigSample struct {
	sent                  time.Time
	fromSent, fromWritten time.Duration
}

// otherService is the ordinary Service that lane changes at its step-th
// change: lanes take Services of their own parity, so that no two write
// the same slice at once.
func otherService(lane, step, n int) int {
	return (step*7919)%(n/2)*2 + lane
}

// samples collects the lanes' samples.
type samples struct {
	mu   sync.Mutex
	all  []bigSample
	fail string
}

func (c *samples) add(x bigSample) {
	c.mu.Lock()
	c.all = append(c.all, x)
	c.mu.Unlock()
}

// during returns the samples sent in [from, to).
func (c *samples) during(from, to time.Time) []bigSample {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []bigSample
	for _, x := range c.all {
		if !x.sent.Before(from) && x.sent.Before(to) {
			out = append(out, x)
		}
	}
	return out
}

// otherLanes is how many ordinary Services change at a time: two lanes,
// each a change every changeSpacing after the last is programmed, half a
// spacing apart, about one change a second in all, within the default
// --ipvs-min-sync-period's rate.
const otherLanes = 2

// sampleOthers changes ordinary Services on otherLanes lanes until stop is
// closed, each change an endpoint added to a Service or removed again
// (a lane stops after a removal), timed as the one-change scenario times
// them. The returned wait ends when every lane has stopped.
func (s *session) sampleOthers(stop <-chan struct{}) (*samples, func()) {
	c := &samples{}
	var wg sync.WaitGroup
	for lane := 0; lane < otherLanes; lane++ {
		wg.Go(func() {
			time.Sleep(time.Duration(lane) * changeSpacing / otherLanes)
			for j := 0; ; j++ {
				if j%2 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
				svc := otherService(lane, j/2, s.n)
				key := ipvs.Key{Address: serviceIP(svc), Protocol: ipvs.TCP, Port: 80}
				added := netip.AddrPortFrom(offset(bigOtherBase, lane*100000+j/2), 8080)
				sl := benchSlice(svc, s.o.perService)
				if j%2 == 0 {
					sl = benchSlice(svc, s.o.perService, added.Addr())
				}
				t0 := time.Now()
				if err := s.putSlice(sl); err != nil {
					c.mu.Lock()
					c.fail = err.Error()
					c.mu.Unlock()
					return
				}
				written := time.Now()
				// Polled often at first, then every 10 ms: a change that
				// waits tens of seconds must not load the kernel it waits on.
				for s.k.hasReal(key, added) != (j%2 == 0) {
					if time.Since(t0) > 15*time.Minute {
						c.mu.Lock()
						c.fail = fmt.Sprintf("endpoint change on %s not programmed after 15m", serviceName(svc))
						c.mu.Unlock()
						return
					}
					if time.Since(t0) < 200*time.Millisecond {
						time.Sleep(2 * time.Millisecond)
					} else {
						time.Sleep(10 * time.Millisecond)
					}
				}
				c.add(bigSample{t0, time.Since(t0), time.Since(written)})
				time.Sleep(changeSpacing)
			}
		})
	}
	return c, wg.Wait
}

// bigCheck says when every big virtual server is in the kernel, or gone
// from it, on a kernel handle of its own. The kernel's dump of 90k virtual
// servers is quadratic, so it asks for each by its key: first a sample of
// them (with their real servers), cheap while the work is far from done,
// then all, then again those not yet there.
type bigCheck struct {
	k    kernel
	b    bigShape
	keys []ipvs.Key
	// reals has the pass over every key check real servers too: where
	// every virtual server is there before and after (an endpoint change).
	reals bool
}

// bigProbes is how many virtual servers, spread over the keys, the check
// asks for before it asks for all.
const bigProbes = 60

// isIn says whether key is as wanted: present with every real server at a
// weight above 0 (probes only check the real servers), or taking no new
// connection (absent, or draining at weight 0).
func (c bigCheck) isIn(key ipvs.Key, in, reals bool) bool {
	_, ok, err := c.k.ipvs.GetVirtualServer(key)
	if err != nil {
		return false
	}
	if !ok || (in && !reals) {
		return ok == in
	}
	got, err := c.k.ipvs.RealServers(key)
	if err != nil {
		return false
	}
	weighted := map[netip.AddrPort]bool{}
	for _, r := range got {
		if r.Weight > 0 {
			weighted[r.ID()] = true
		}
	}
	if !in {
		return len(weighted) == 0
	}
	for _, r := range c.b.reals(key) {
		if !weighted[r] {
			return false
		}
	}
	return true
}

// wait returns how long after start every key was in (or gone), and how
// many were not when limit passed.
func (c bigCheck) wait(start time.Time, in bool, limit time.Duration) (time.Duration, int) {
	step := max(1, len(c.keys)/bigProbes)
	for {
		probed := true
		for i := 0; i < len(c.keys) && probed; i += step {
			probed = c.isIn(c.keys[i], in, true)
		}
		if probed || time.Since(start) > limit {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The sample's time stands unless the first pass over every key finds
	// some not yet so; then it is when the last of those was.
	at := time.Since(start)
	missing := c.keys
	for pass := 0; ; pass++ {
		var still []ipvs.Key
		for _, k := range missing {
			if !c.isIn(k, in, c.reals) {
				still = append(still, k)
			}
		}
		if pass > 0 && len(still) < len(missing) {
			at = time.Since(start)
		}
		missing = still
		if len(missing) == 0 || time.Since(start) > limit {
			return at, len(missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// deleteBig deletes the big Service and its slice, tolerating either gone.
func deleteBig(s *session) error {
	ctx, cancel := framework.Ctx()
	defer cancel()
	err := s.client.CoreV1().Services(namespace).Delete(ctx, bigName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = s.client.DiscoveryV1().EndpointSlices(namespace).Delete(ctx, bigName+"-1", metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// bigPhase is one phase's window and what the proxier did in it.
type bigPhase struct {
	name     string
	from, to time.Time
	// took is the big Service's time to be in or gone; missing its virtual
	// servers not so at the cap.
	took    *time.Duration
	missing int
	cpu     time.Duration
	rss     float64
}

// bigBaseline is how long ordinary changes are timed before the big
// Service is written, and after it is gone (the kernel's dest trash then
// holds its 180k real servers, which every real server added searches).
const bigBaseline = 10 * time.Second

// bigService runs the scenario on our proxier: ordinary changes throughout;
// the big Service's slice, then the Service, written and timed until every
// virtual server is in the kernel; held until a drift check has read it;
// one of its endpoints replaced (every virtual server's real servers
// checked); deleted and timed until gone.
func (s *session) bigService() ([]record, error) {
	if s.n < otherLanes {
		return nil, fmt.Errorf("the big Service's scenario needs %d ordinary Services", otherLanes)
	}
	b := bigDefault
	check := bigCheck{b: b, keys: b.objects().virtualServers}
	var err error
	if check.k, err = openKernel(); err != nil {
		return nil, err
	}
	if err := deleteBig(s); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	others, wait := s.sampleOthers(stop)
	stopped := false
	end := func() {
		if !stopped {
			stopped = true
			close(stop)
			wait()
		}
	}
	defer end()
	defer func() { _ = deleteBig(s) }()
	// A phase ends when the big Service is in or gone, before the check has
	// asked for every key: the changes sent meanwhile count in the next,
	// unless it begins with a write (start set again), then in none.
	var phases []bigPhase
	start, cpu0 := time.Now(), s.usage().CPU
	mark := func(name string, took *time.Duration, missing int) {
		u := s.usage()
		end := time.Now()
		if took != nil {
			end = start.Add(*took)
		}
		ph := bigPhase{name, start, end, nil, missing, u.CPU - cpu0, u.RSSMB}
		if took != nil {
			ph.took = ptr(*took)
		}
		phases = append(phases, ph)
		start, cpu0 = end, u.CPU
	}
	time.Sleep(bigBaseline)
	ctx, cancel := framework.Ctx()
	_, err = s.client.DiscoveryV1().EndpointSlices(namespace).Create(ctx, triggered(b.slice()), metav1.CreateOptions{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("big Service's slice: %w", err)
	}
	time.Sleep(time.Second) // the slice alone programs nothing
	mark("before", nil, 0)
	ctx, cancel = framework.Ctx()
	_, err = s.client.CoreV1().Services(namespace).Create(ctx, b.service(), metav1.CreateOptions{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("big Service: %w", err)
	}
	took, missing := check.wait(start, true, 15*time.Minute)
	mark("program", &took, missing)
	s.logf("big Service: %d virtual servers in after %s (%d missing)", len(check.keys), took.Round(time.Millisecond), missing)

	// Held until a drift check has started and ended with it in the kernel.
	c0 := syncCount(mustScrape())
	for syncCount(mustScrape()) < c0+2 && time.Since(start) < 3*time.Minute {
		time.Sleep(time.Second)
	}
	mark("hold", nil, 0)

	check.b, check.reals = b.moved(), true
	if err := s.putSlice(check.b.slice()); err != nil {
		return nil, fmt.Errorf("big Service's slice: %w", err)
	}
	took, missing = check.wait(start, true, 15*time.Minute)
	mark("endpoint", &took, missing)
	s.logf("big Service: one endpoint replaced after %s", took.Round(time.Millisecond))

	start = time.Now()
	if err := deleteBig(s); err != nil {
		return nil, err
	}
	took, missing = check.wait(start, false, 15*time.Minute)
	mark("delete", &took, missing)
	s.logf("big Service: gone after %s (%d left)", took.Round(time.Millisecond), missing)

	time.Sleep(bigBaseline)
	end()
	mark("after", nil, 0)
	syncs := readSyncs(s.p.LogPath)
	return s.bigRecords(phases, others, syncs, len(check.keys)), nil
}

// bigRecords makes a record per phase: the big Service's time, the other
// changes' latency, the longest sync and the claim's verdict.
func (s *session) bigRecords(phases []bigPhase, others *samples, syncs []syncLine, vss int) []record {
	var out []record
	for _, ph := range phases {
		r := s.record("big-service")
		r.Change = ph.name
		xs := others.during(ph.from, ph.to)
		r.Samples = ptr(len(xs))
		r.CPUs, r.RSSMB = ptr(ph.cpu.Seconds()), ptr(ph.rss)
		if ph.took != nil {
			r.BigServiceMs = ptr(ms(*ph.took))
		}
		r.KernelObjectsOK = ptr(ph.missing == 0 && others.fail == "")
		to := ph.to
		var fromSent, fromWritten []time.Duration
		var worst time.Duration
		for _, x := range xs {
			fromSent, fromWritten = append(fromSent, x.fromSent), append(fromWritten, x.fromWritten)
			worst = max(worst, x.fromSent)
			if done := x.sent.Add(x.fromSent); done.After(to) {
				to = done
			}
		}
		if len(xs) > 0 {
			setLatencies(&r, fromSent, fromWritten)
			r.MaxMs = ptr(ms(worst))
		}
		st := syncsDuring(syncs, ph.from, to)
		note := fmt.Sprintf("%d syncs", st.count)
		if st.count > 0 {
			r.LongestSyncMs = ptr(ms(st.longest))
			note += fmt.Sprintf(", longest %s (%d Services, %d kernel writes)", st.longest.Round(time.Millisecond), st.longestServices, st.longestOps)
		}
		if st.longestFull > 0 {
			note += fmt.Sprintf("; longest drift check %s with its background read", st.longestFull.Round(time.Millisecond))
		}
		if ph.took != nil {
			note = fmt.Sprintf("%d virtual servers; ", vss) + note
			// The check's own requests queue behind a drift check's
			// listing; the sync that wrote the Service says when it was
			// done, and the check that it was.
			if ended := st.longestEnd.Sub(ph.from); st.count > 0 && ended > 0 && ended < *ph.took {
				r.BigServiceMs = ptr(ms(ended))
				note += fmt.Sprintf(", ended %s after the write (the check's requests saw it after %s)",
					ended.Round(time.Millisecond), ph.took.Round(time.Millisecond))
			}
		}
		if ph.missing > 0 {
			note = fmt.Sprintf("%d virtual servers not done at the cap; ", ph.missing) + note
		}
		if others.fail != "" {
			note += "; " + others.fail
		}
		r.Note = note
		if r.MaxMs != nil {
			s.logf("big Service, %s: other changes p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d); %s",
				ph.name, *r.P50ms, *r.P99ms, *r.MaxMs, len(xs), note)
		}
		out = append(out, r)
	}
	return out
}
