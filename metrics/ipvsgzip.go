package metrics

import (
	"hash/maphash"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/gzchunk"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// gzipText writes a scrape's text gzipped, keeping the compressed lines of
// real servers between scrapes: seven series per real server are most of a
// scrape (700k lines, 110 MB at 10k Services), and most of them are as the
// last scrape wrote them, since RollingStats reads a share of the real
// servers again and idle ones count nothing new. The virtual servers' own
// series are compressed anew each time.
//
// The real servers are cut into runs of virtual servers, a run starting
// wherever a virtual server's key hashes to 0 modulo runEvery, so that a
// virtual server added or removed changes one run rather than shifting
// all that follow. A run is compressed again only when one of its virtual
// servers, their Services or their real servers' figures changed.
type gzipText struct {
	mu      sync.Mutex
	seed    maphash.Seed
	comp    gzchunk.Compressor
	headers []gzchunk.Chunk // each family's HELP and TYPE, by ipvsFamilies index
	runs    map[ipvs.Key]*run
}

// runEvery is how many virtual servers a run has on average: 64 of 10 real
// servers make ~100 KB of text per family, which compresses as well as
// the whole.
const runEvery = 64

// run is a run of virtual servers and each real-server family's lines of
// them, compressed (nil for the virtual-server families).
type run struct {
	keys   []ipvs.Key
	owners []string
	reals  [][]ipvs.RealServerStats
	chunks []gzchunk.Chunk
}

func newGzipText() *gzipText {
	return &gzipText{seed: maphash.MakeSeed()}
}

// write writes the scrape of stats to w as one gzip member. The chunks are
// made under the lock and written after it, so that a client that reads
// slowly holds back no other scrape.
func (g *gzipText) write(w io.Writer, stats []ipvs.VirtualServerStats, owners map[ipvs.Key]string, read time.Duration) error {
	return gzchunk.Write(w, g.chunks(stats, owners, read))
}

// chunks are the compressed chunks of the scrape of stats, in order.
func (g *gzipText) chunks(stats []ipvs.VirtualServerStats, owners map[ipvs.Key]string, read time.Duration) []gzchunk.Chunk {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.headers == nil {
		for fi := range ipvsFamilies {
			g.headers = append(g.headers, g.comp.Compress(ipvsFamilies[fi].appendHeader(nil)))
		}
	}
	labels := labelsOf(stats, owners)
	next := make(map[ipvs.Key]*run, len(g.runs))
	var runs []*run
	for start := 0; start < len(stats); {
		end := start + 1
		for end < len(stats) && maphash.Comparable(g.seed, stats[end].Key)%runEvery != 0 {
			end++
		}
		r := g.runs[stats[start].Key]
		if !r.holds(stats[start:end], owners) {
			r = g.compress(stats[start:end], labels[start:end], owners)
		}
		next[stats[start].Key] = r
		runs = append(runs, r)
		start = end
	}
	g.runs = next
	var out []gzchunk.Chunk
	var text []byte
	for fi := range ipvsFamilies {
		f := &ipvsFamilies[fi]
		out = append(out, g.headers[fi])
		if f.vs != nil {
			text = f.appendVirtualServers(text[:0], stats, labels)
			out = append(out, g.comp.Compress(text))
			continue
		}
		for _, r := range runs {
			out = append(out, r.chunks[fi])
		}
	}
	return append(out, g.comp.Compress(appendReadDuration(text[:0], read)))
}

// compress makes the run of stats, compressing its real servers' lines.
func (g *gzipText) compress(stats []ipvs.VirtualServerStats, labels [][]byte, owners map[ipvs.Key]string) *run {
	r := &run{chunks: make([]gzchunk.Chunk, len(ipvsFamilies))}
	for i := range stats {
		r.keys = append(r.keys, stats[i].Key)
		r.owners = append(r.owners, owners[stats[i].Key])
		r.reals = append(r.reals, stats[i].Reals)
	}
	var text []byte
	for fi := range ipvsFamilies {
		if f := &ipvsFamilies[fi]; f.rs != nil {
			text = f.appendRealServers(text[:0], stats, labels)
			r.chunks[fi] = g.comp.Compress(text)
		}
	}
	return r
}

// holds says whether r was compressed from the same virtual servers, of
// the same Services, with the same real servers and figures as stats.
func (r *run) holds(stats []ipvs.VirtualServerStats, owners map[ipvs.Key]string) bool {
	if r == nil || len(r.keys) != len(stats) {
		return false
	}
	for i := range stats {
		if r.keys[i] != stats[i].Key || r.owners[i] != owners[stats[i].Key] || !slices.Equal(r.reals[i], stats[i].Reals) {
			return false
		}
	}
	return true
}
