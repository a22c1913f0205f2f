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
// VM), as the kernel has no dump of every real server. The drift check
// holds its reads to the same share.
const StatsDumpsMax = 2500

// RollingStats reads the IPVS statistics for /metrics/ipvs at a bounded
// cost: every virtual server's counters each time (one dump), the real
// servers of each virtual server never read before, and of the rest the
// DumpsMax least recently read; the others' real servers are served as
// last read. So every series is there from the first scrape, and a real
// server's figures are at most ceil(n/DumpsMax) scrapes old among n
// virtual servers (every scrape's below 2,500 virtual servers).
type RollingStats struct {
	Source ipvs.StatsReader
	// DumpsMax bounds the re-reads of a scrape (StatsDumpsMax if zero).
	DumpsMax int

	mu    sync.Mutex
	reads uint64
	last  map[ipvs.Key]realsRead
}

// realsRead is a virtual server's real servers as a read found them, and
// which read (RollingStats.reads) that was.
type realsRead struct {
	reals []ipvs.RealServerStats
	read  uint64
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
	// Never read first (read 0), then the least recently read.
	order := make([]int, len(vss))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(r.last[vss[a].Key].read, r.last[vss[b].Key].read)
	})
	budget := cmp.Or(r.DumpsMax, StatsDumpsMax)
	next := make(map[ipvs.Key]realsRead, len(vss))
	for n, i := range order {
		k := vss[i].Key
		prev, known := r.last[k]
		if known && n >= budget {
			next[k] = prev
			continue
		}
		reals, err := r.Source.RealServerStats(k)
		if err != nil {
			return nil, err
		}
		if known && slices.Equal(reals, prev.reals) {
			reals = prev.reals // one copy kept, and the same one as the gzipped runs'
		}
		next[k] = realsRead{reals: reals, read: r.reads}
	}
	r.last = next
	for i := range vss {
		vss[i].Reals = next[vss[i].Key].reals
	}
	return vss, nil
}
