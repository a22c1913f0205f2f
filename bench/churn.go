package main

import (
	"fmt"
	"math/rand"
	"net/netip"
	"sync"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// churnWorkers write in parallel; a Service always goes to the same worker,
// so its writes keep their order and the final state is known.
const churnWorkers = 48

// churnBase is where the churn scenario's endpoints live.
var churnBase = netip.MustParseAddr("10.210.0.0")

// churn changes one endpoint o.churnRate times per second for
// o.churnDuration (adding an endpoint to a Service, or removing the one added
// before), then waits until the kernel holds exactly the final state. Latency
// comes from the proxier's own network programming metric.
func (s *session) churn() (record, error) {
	rec := s.record("churn")
	before := s.usage()
	metricsBefore, _ := scrape()
	rng := rand.New(rand.NewSource(1))
	var mu sync.Mutex
	extra := map[int]netip.Addr{} // Service → its added endpoint, as written
	var writes, failures int
	queues := make([]chan int, churnWorkers)
	var wg sync.WaitGroup
	next := 0
	for w := range queues {
		queues[w] = make(chan int, 64)
		wg.Add(1)
		go func(q <-chan int) {
			defer wg.Done()
			for svc := range q {
				mu.Lock()
				_, has := extra[svc]
				add := offset(churnBase, next)
				next++
				mu.Unlock()
				sl := benchSlice(svc, s.o.perService)
				if !has {
					sl = benchSlice(svc, s.o.perService, add)
				}
				err := s.putSlice(sl)
				mu.Lock()
				switch {
				case err != nil:
					failures++
				case has:
					delete(extra, svc)
				default:
					extra[svc] = add
				}
				writes++
				mu.Unlock()
			}
		}(queues[w])
	}
	interval := time.Second / time.Duration(s.o.churnRate)
	tick := time.NewTicker(interval)
	start := time.Now()
	sent := 0
	for time.Since(start) < s.o.churnDuration {
		<-tick.C
		svc := rng.Intn(s.n)
		select {
		case queues[svc%churnWorkers] <- svc:
			sent++
		default: // the API cannot keep up; counted as the achieved rate
		}
	}
	tick.Stop()
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	writeTime := time.Since(start)
	s.logf("churn: %d writes in %s (%d failed); waiting for the kernel", writes, writeTime.Round(time.Second), failures)

	// The exact final state: every Service's real servers with a non-zero
	// weight (removed TCP real servers may still drain at weight 0).
	// Read over netlink, one dump per virtual server: /proc/net/ip_vs is
	// quadratic in the kernel (each page resumes by walking the table from
	// the start) and took minutes per read at 50k.
	converged := func() (bool, string) {
		for i := 0; i < s.n; i++ {
			want := map[netip.AddrPort]bool{}
			for j := 0; j < s.o.perService; j++ {
				want[netip.AddrPortFrom(endpointIP(i, j, s.o.perService), 8080)] = true
			}
			if a, ok := extra[i]; ok {
				want[netip.AddrPortFrom(a, 8080)] = true
			}
			key := ipvs.Key{Address: serviceIP(i), Protocol: ipvs.TCP, Port: 80}
			reals, err := s.k.ipvs.RealServers(key)
			if err != nil {
				return false, err.Error()
			}
			got := 0
			for _, r := range reals {
				if r.Weight == 0 {
					continue
				}
				if !want[r.ID()] {
					return false, fmt.Sprintf("%s has stray real server %s", serviceName(i), r.ID())
				}
				got++
			}
			if got != len(want) {
				return false, fmt.Sprintf("%s has %d of %d real servers", serviceName(i), got, len(want))
			}
		}
		return true, ""
	}
	wait := time.Now()
	ok, why := converged()
	for !ok && time.Since(wait) < max(s.cap, 5*time.Minute) {
		time.Sleep(500 * time.Millisecond)
		ok, why = converged()
	}
	settle := time.Since(wait)
	after := s.usage()
	rec.KernelObjectsOK = ptr(ok)
	rec.CPUs, rec.RSSMB = ptr((after.CPU - before.CPU).Seconds()), ptr(after.RSSMB)
	rec.Samples = ptr(writes - failures)
	rec.Note = fmt.Sprintf("%d writes in %s (%.0f/s), final state after +%s", writes-failures,
		writeTime.Round(time.Second), float64(writes-failures)/writeTime.Seconds(), settle.Round(100*time.Millisecond))
	if !ok {
		rec.Note = fmt.Sprintf("%d writes in %s; final state NOT reached after %s: %s", writes-failures,
			writeTime.Round(time.Second), settle.Round(time.Second), why)
	}
	if metricsBefore != nil {
		rec.P50ms, rec.P99ms = networkProgramming(metricsBefore)
		rec.MetricP50ms, rec.MetricP99ms = rec.P50ms, rec.P99ms
	}
	s.logf("churn: %s", rec.Note)

	// Put the slices back, so later proxiers see the same objects.
	var restore []int
	for svc := range extra {
		restore = append(restore, svc)
	}
	return rec, parallel(churnWorkers, restore, func(svc int) error { return s.putSlice(benchSlice(svc, s.o.perService)) })
}

// parallel calls fn for every item on the given number of goroutines and
// returns the first error.
func parallel(workers int, items []int, fn func(int) error) error {
	work := make(chan int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := fn(i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for _, i := range items {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}
