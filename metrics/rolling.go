package metrics

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// StatsDumpsMax is how many virtual servers' real servers a scrape dumps
// again, at most, when it has read them before: one dump per virtual
// server is what a scrape costs at scale (2.65 CPU s for 10k in the test
// VM), as the kernel has no dump of every real server. The drift check's
// own dumps serve too (RollingStats.Saw).
const StatsDumpsMax = 1000

// seenFor is how long after a scrape the real servers others dump are kept
// for the next one: past it, scrapes have stopped or come seldom, and the
// copies would only hold memory.
const seenFor = 10 * time.Minute

// RollingStats reads the IPVS statistics for /metrics/ipvs at a bounded
// cost: every virtual server's counters each time (one dump), the real
// servers of each virtual server never read before, and of the rest the
// DumpsMax least recently read; the others' real servers are served as
// last read, by a scrape or by another reader of the same table (Saw: the
// drift check, which above 5,000 virtual servers dumps 2,500 of them a
// sync period). So every series is there from the first scrape, every
// figure is fresh at every scrape below DumpsMax virtual servers, and a
// real server's figures are at most ceil(n/DumpsMax) scrapes old among n,
// or as old as the drift check's turn through them, whichever is sooner.
type RollingStats struct {
	Source ipvs.StatsReader
	// DumpsMax bounds the re-reads of a scrape (StatsDumpsMax if zero).
	DumpsMax int
	// Clock is time.Now if nil.
	Clock func() time.Time

	mu     sync.Mutex
	tapped bool
	reads  uint64
	last   map[ipvs.Key]realsRead

	// seenMu guards seen, the real servers others dumped since the last
	// scrape, kept only while scrapes come (lastScrape, seenFor).
	seenMu     sync.Mutex
	lastScrape time.Time
	seen       map[ipvs.Key][]ipvs.RealServerStats
}

// realsRead is a virtual server's real servers as a read found them, and
// which read (RollingStats.reads) that was.
type realsRead struct {
	reals []ipvs.RealServerStats
	read  uint64
}

func (r *RollingStats) now() time.Time {
	if r.Clock != nil {
		return r.Clock()
	}
	return time.Now()
}

// Saw takes a virtual server's real servers as another reader dumped them
// (Read hands it to a Source that is an ipvs.StatsTap): the next scrape
// may serve them instead of dumping them again. It never waits for a
// scrape.
func (r *RollingStats) Saw(k ipvs.Key, reals []ipvs.RealServerStats) {
	r.seenMu.Lock()
	defer r.seenMu.Unlock()
	if r.lastScrape.IsZero() || r.now().Sub(r.lastScrape) > seenFor {
		r.seen = nil // no scrape to serve: the first reads everything anyway
		return
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
	if t, ok := r.Source.(ipvs.StatsTap); ok && !r.tapped {
		t.TapRealServerStats(r.Saw)
		r.tapped = true
	}
	vss, err := r.Source.VirtualServerStats()
	if err != nil {
		return nil, err
	}
	r.reads++
	// What others dumped since the last scrape is as good as read now;
	// what they dump from here on waits for the next scrape.
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
	var dumped []ipvs.Key
	next := make(map[ipvs.Key]realsRead, len(vss))
	for _, i := range order {
		k := vss[i].Key
		prev, known := r.last[k]
		if known && len(dumped) >= budget {
			next[k] = prev
			continue
		}
		reals, err := r.Source.RealServerStats(k)
		if err != nil {
			return nil, err
		}
		dumped = append(dumped, k)
		if known {
			reals = sameOr(prev.reals, reals)
		}
		next[k] = realsRead{reals: reals, read: r.reads}
	}
	r.last = next
	// Another reader's dump of a virtual server this scrape dumped too may
	// be the older of the two: served next time, it would set counters back.
	r.seenMu.Lock()
	for _, k := range dumped {
		delete(r.seen, k)
	}
	r.lastScrape = r.now()
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
