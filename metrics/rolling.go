package metrics

import (
	"cmp"
	"slices"
	"sync"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// StatsDumpsMax is how many virtual servers' real servers a scrape dumps
// again, at most, when it has read them before: one dump per virtual
// server is what a scrape costs at scale (2.65 CPU s for 10k in the test
// VM), as the kernel has no dump of every real server. The drift check's
// own dumps, 2,500 a period at most, serve too (RollingStats.Saw).
const StatsDumpsMax = 1000

// RollingStats reads the IPVS statistics for /metrics/ipvs at a bounded
// cost: every virtual server's counters each time (one dump), the real
// servers of each virtual server never read before, and of the rest the
// DumpsMax least recently read; the others' real servers are served as
// last read, by a scrape or by the drift check (Saw). So every series is
// there from the first scrape, and a real server's figures are at most
// ceil(n/DumpsMax) scrapes old among n virtual servers, or as old as the
// drift check's turn through them (ceil(n/2,500) sync periods), whichever
// is sooner.
type RollingStats struct {
	Source ipvs.StatsReader
	// DumpsMax bounds the re-reads of a scrape (StatsDumpsMax if zero).
	DumpsMax int

	mu    sync.Mutex
	reads uint64
	last  map[ipvs.Key]realsRead

	// seenMu guards seen: real servers others read since the last scrape,
	// kept only once a scrape has read everything (scraped).
	seenMu  sync.Mutex
	scraped bool
	seen    map[ipvs.Key][]ipvs.RealServerStats
}

// realsRead is a virtual server's real servers as a read found them, and
// which read (RollingStats.reads) that was.
type realsRead struct {
	reals []ipvs.RealServerStats
	read  uint64
}

// Saw takes a virtual server's real servers as another reader dumped them
// (ipvs.Netlink.TapRealServerStats): the next scrape serves them without
// dumping them again. It never waits for a scrape.
func (r *RollingStats) Saw(k ipvs.Key, reals []ipvs.RealServerStats) {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if !r.scraped {
		return // the first scrape reads everything anyway
	}
	if r.seen == nil {
		r.seen = map[ipvs.Key][]ipvs.RealServerStats{}
	}
	r.seen[k] = reals
}

// Read lists every virtual server with its counters and its real servers'.
func (r *RollingStats) Read() ([]ipvs.VirtualServerStats, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	vss, err := r.Source.VirtualServerStats()
	if err != nil {
		return nil, err
	}
	r.reads++
	r.seenMu.Lock()
	seen := r.seen
	r.seen = nil
	r.seenMu.Unlock()
	for k, reals := range seen {
		if prev, known := r.last[k]; known {
			r.last[k] = realsRead{reals: sameOr(prev.reals, reals), read: r.reads}
		}
	}
	// Never read first (read 0), then the least recently read.
	order := make([]int, len(vss))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(r.last[vss[a].Key].read, r.last[vss[b].Key].read)
	})
	budget := cmp.Or(r.DumpsMax, StatsDumpsMax)
	dumps := 0
	next := make(map[ipvs.Key]realsRead, len(vss))
	for _, i := range order {
		k := vss[i].Key
		prev, known := r.last[k]
		if known && (prev.read == r.reads || dumps >= budget) {
			next[k] = prev
			continue
		}
		reals, err := r.Source.RealServerStats(k)
		if err != nil {
			return nil, err
		}
		dumps++
		if known {
			reals = sameOr(prev.reals, reals)
		}
		next[k] = realsRead{reals: reals, read: r.reads}
	}
	r.last = next
	r.seenMu.Lock()
	r.scraped = true
	r.seenMu.Unlock()
	for i := range vss {
		vss[i].Reals = next[vss[i].Key].reals
	}
	return vss, nil
}

// sameOr returns prev if cur holds the same figures: one copy kept, and the
// same one as the gzipped runs', which compare slices to find what changed.
func sameOr(prev, cur []ipvs.RealServerStats) []ipvs.RealServerStats {
	if slices.Equal(cur, prev) {
		return prev
	}
	return cur
}
