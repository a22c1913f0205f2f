package main

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// floorBigService is the floor's big-service scenario: the big Service's
// kernel objects written, and then deleted, with one netlink message per
// system call on a kernel handle of their own, while floor one-change
// samples run beside them. It shows what the kernel alone costs other
// changes meanwhile (its IPVS mutex is taken per message); there is no sync
// to wait for.
func floorBigService(env *framework.Env, k kernel, n, perService int) ([]record, error) {
	b := bigDefault
	w, err := openKernel()
	if err != nil {
		return nil, err
	}
	o := b.objects()
	var stop atomic.Bool
	others := &samples{}
	var wg sync.WaitGroup
	wg.Go(func() {
		err := floorSamples(env, k, n, perService, bigOtherBase, func(s int) bool { return s%2 == 1 || !stop.Load() },
			func(sent time.Time, fromSent, fromWritten time.Duration) {
				others.add(bigSample{sent, fromSent, fromWritten})
			})
		if err != nil {
			others.mu.Lock()
			others.fail = err.Error()
			others.mu.Unlock()
		}
	})
	end := func() { stop.Store(true); wg.Wait() }
	var phases []bigPhase
	mark := func(name string, from time.Time, took time.Duration) {
		ph := bigPhase{name: name, from: from, to: time.Now()}
		if took > 0 {
			ph.took = &took
		}
		phases = append(phases, ph)
	}
	start := time.Now()
	time.Sleep(bigBaseline)
	mark("before", start, 0)

	start = time.Now()
	if err := floorGrow(w, o); err != nil {
		end()
		return nil, err
	}
	_, err = floorWrite(w, o, b.reals)
	took := time.Since(start)
	mark("program", start, took)
	progress("[%d svc] floor: big Service written in %s", n, took.Round(time.Millisecond))
	if err != nil {
		end()
		return nil, fmt.Errorf("big Service: %w", err)
	}

	start = time.Now()
	err = floorMoveEndpoint(w, o, b, b.moved())
	took = time.Since(start)
	mark("endpoint", start, took)
	progress("[%d svc] floor: one endpoint replaced in %s", n, took.Round(time.Millisecond))
	if err != nil {
		end()
		return nil, fmt.Errorf("big Service: %w", err)
	}

	start = time.Now()
	err = floorDelete(w, o)
	took = time.Since(start)
	mark("delete", start, took)
	progress("[%d svc] floor: big Service deleted in %s", n, took.Round(time.Millisecond))
	if err != nil {
		end()
		return nil, fmt.Errorf("big Service: %w", err)
	}
	start = time.Now()
	time.Sleep(bigBaseline)
	end()
	mark("after", start, 0)

	var out []record
	for _, ph := range phases {
		r := record{Proxier: "floor", Scenario: "big-service", Change: ph.name, Services: n, EndpointsPerService: perService,
			KernelObjectsOK: ptr(others.fail == "")}
		if ph.took != nil {
			r.BigServiceMs = ptr(ms(*ph.took))
			r.Note = fmt.Sprintf("%d virtual servers, %d real servers, %d entries, %d addresses, one netlink message each; ",
				len(o.virtualServers), len(o.virtualServers)*b.endpoints, len(o.entries), len(o.addresses))
			if ph.name == "endpoint" {
				r.Note = fmt.Sprintf("a real server added and one deleted on each of %d virtual servers, one netlink message each; ", len(o.virtualServers))
			}
		}
		r.Note += "samples: API write, watch event, one netlink call"
		if others.fail != "" {
			r.Note += "; " + others.fail
		}
		xs := others.during(ph.from, ph.to)
		r.Samples = ptr(len(xs))
		if len(xs) > 0 {
			var fromSent, fromWritten []time.Duration
			var worst time.Duration
			for _, x := range xs {
				fromSent, fromWritten = append(fromSent, x.fromSent), append(fromWritten, x.fromWritten)
				worst = max(worst, x.fromSent)
			}
			setLatencies(&r, fromSent, fromWritten)
			r.MaxMs = ptr(ms(worst))
		}
		out = append(out, r)
	}
	return out, nil
}

// floorGrow makes room in the sets for o's entries, as our proxier does
// (KUBE-EXTERNAL-IP takes 90,000, beyond the 65,536 the cold start made):
// to twice what they will hold, rounded up to a power of two.
func floorGrow(k kernel, o kernelObjects) error {
	more := map[string]int{}
	for _, e := range o.entries {
		more[e.set]++
	}
	for set, m := range more {
		have, err := k.sets.Count(set)
		if err != nil {
			return err
		}
		capacity, err := k.sets.Capacity(set)
		if err != nil {
			return err
		}
		if need := have + m; need > capacity {
			s := ipset.Set{Name: set, Type: benchSets[set], Family: setFamily(set), MaxElem: ipset.DefaultMaxElem}
			if err := k.sets.Grow(s, uint32(1)<<bits.Len(uint(2*need-1))); err != nil {
				return err
			}
		}
	}
	return nil
}

// floorMoveEndpoint replaces from's real servers by to's on every virtual
// server of o, one netlink message each.
func floorMoveEndpoint(k kernel, o kernelObjects, from, to bigShape) error {
	for _, key := range o.virtualServers {
		vs := ipvs.VirtualServer{Key: key}
		old, now := from.reals(key), to.reals(key)
		for _, r := range now {
			if !slices.Contains(old, r) {
				rs := ipvs.RealServer{Address: r.Addr(), Port: r.Port(), Weight: 1}
				if err := k.ipvs.Write([]ipvs.Op{{Kind: ipvs.AddRS, VS: vs, RS: rs}})[0]; err != nil {
					return err
				}
			}
		}
		for _, r := range old {
			if !slices.Contains(now, r) {
				rs := ipvs.RealServer{Address: r.Addr(), Port: r.Port()}
				if err := k.ipvs.Write([]ipvs.Op{{Kind: ipvs.DeleteRS, VS: vs, RS: rs}})[0]; err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// floorDelete deletes o's kernel objects with one netlink message each: a
// virtual server takes its real servers with it.
func floorDelete(k kernel, o kernelObjects) error {
	for _, key := range o.virtualServers {
		if err := k.ipvs.Write([]ipvs.Op{{Kind: ipvs.DeleteVS, VS: ipvs.VirtualServer{Key: key}}})[0]; err != nil {
			return err
		}
	}
	for _, e := range o.entries {
		if err := k.sets.DeleteEntries(e.set, []ipset.Entry{e.entry})[0]; err != nil {
			return fmt.Errorf("%s %s: %w", e.set, e.entry, err)
		}
	}
	for _, a := range o.addresses {
		if err := k.links.DeleteAddresses([]netip.Addr{a})[0]; err != nil {
			return err
		}
	}
	return nil
}
