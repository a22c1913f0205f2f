package metrics

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// countingStats is a statistics source whose real servers carry a number
// the test sets, and which counts the real-server dumps by virtual server.
type countingStats struct {
	keys  []ipvs.Key
	conns uint64 // every real server's Connections
	dumps map[ipvs.Key]int
}

func (c *countingStats) VirtualServerStats() ([]ipvs.VirtualServerStats, error) {
	var out []ipvs.VirtualServerStats
	for _, k := range c.keys {
		out = append(out, ipvs.VirtualServerStats{Key: k, Counters: ipvs.Counters{Connections: c.conns}})
	}
	return out, nil
}

func (c *countingStats) RealServerStats(k ipvs.Key) ([]ipvs.RealServerStats, error) {
	c.dumps[k]++
	return []ipvs.RealServerStats{{ID: netip.MustParseAddrPort("10.244.0.1:8080"), Counters: ipvs.Counters{Connections: c.conns}}}, nil
}

func statsKey(i int) ipvs.Key {
	return ipvs.Key{Address: netip.MustParseAddr(fmt.Sprintf("10.96.0.%d", i)), Protocol: "TCP", Port: 80}
}

// TestRollingStatsBoundsTheDumpsOfAScrape: every virtual server's real
// servers at the first read; then at most DumpsMax again per read, the
// least recently read first, so each is fresh within ceil(n/DumpsMax)
// reads; a new virtual server is read at once, a gone one forgotten. The
// virtual servers' own counters are fresh at every read.
func TestRollingStatsBoundsTheDumpsOfAScrape(t *testing.T) {
	src := &countingStats{dumps: map[ipvs.Key]int{}}
	for i := 1; i <= 5; i++ {
		src.keys = append(src.keys, statsKey(i))
	}
	r := &RollingStats{Source: src, DumpsMax: 2}
	read := func() []ipvs.VirtualServerStats {
		t.Helper()
		vss, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		return vss
	}
	total := func() (n int) {
		for _, d := range src.dumps {
			n += d
		}
		return n
	}

	src.conns = 1
	for _, vs := range read() {
		if len(vs.Reals) != 1 || vs.Reals[0].Connections != 1 {
			t.Fatalf("the first read misses %s's real servers: %+v", vs.Key, vs.Reals)
		}
	}
	if total() != 5 {
		t.Fatalf("the first read dumped %d virtual servers' real servers; want all 5", total())
	}

	src.conns = 2
	fresh := map[ipvs.Key]int{}
	for n := 1; n <= 3; n++ {
		before := total()
		for _, vs := range read() {
			if vs.Connections != 2 {
				t.Fatalf("read %d: %s's own counters are stale", n, vs.Key)
			}
			if vs.Reals[0].Connections == 2 && fresh[vs.Key] == 0 {
				fresh[vs.Key] = n
			}
		}
		if d := total() - before; d > 2 {
			t.Fatalf("read %d dumped %d virtual servers' real servers; want at most 2", n, d)
		}
	}
	if len(fresh) != 5 {
		t.Fatalf("after 3 reads of 5 virtual servers, 2 at a time, only %d are fresh: %v", len(fresh), fresh)
	}

	src.keys = append(src.keys[1:], statsKey(6), statsKey(7), statsKey(8))
	before := src.dumps[statsKey(1)]
	vss := read()
	if len(vss) != 7 || src.dumps[statsKey(1)] != before {
		t.Fatalf("a gone virtual server was read or served: %d served", len(vss))
	}
	for _, k := range []ipvs.Key{statsKey(6), statsKey(7), statsKey(8)} {
		if src.dumps[k] != 1 {
			t.Errorf("new virtual server %s dumped %d times at its first read; want 1", k, src.dumps[k])
		}
	}
	if _, kept := r.last[statsKey(1)]; kept {
		t.Error("a gone virtual server's real servers are still kept")
	}
}

// TestRollingStatsServesWhatOthersRead: real servers another reader dumped
// since the last scrape (the drift check, through Saw) are served as it
// found them and not dumped again, so a scrape's dumps go to the rest;
// before the first scrape nothing is kept (that scrape reads everything).
func TestRollingStatsServesWhatOthersRead(t *testing.T) {
	src := &countingStats{dumps: map[ipvs.Key]int{}}
	for i := 1; i <= 4; i++ {
		src.keys = append(src.keys, statsKey(i))
	}
	r := &RollingStats{Source: src, DumpsMax: 3}
	seen := func(k ipvs.Key, conns uint64) {
		r.Saw(k, []ipvs.RealServerStats{{ID: netip.MustParseAddrPort("10.244.0.1:8080"), Counters: ipvs.Counters{Connections: conns}}})
	}
	seen(statsKey(1), 7)
	if r.seen != nil {
		t.Fatal("real servers seen before the first scrape were kept")
	}
	src.conns = 1
	if _, err := r.Read(); err != nil {
		t.Fatal(err)
	}

	src.conns = 2
	seen(statsKey(1), 5)
	seen(statsKey(2), 5)
	before := map[ipvs.Key]int{}
	for k, n := range src.dumps {
		before[k] = n
	}
	vss, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	got := map[ipvs.Key]uint64{}
	for _, vs := range vss {
		got[vs.Key] = vs.Reals[0].Connections
	}
	for _, k := range []ipvs.Key{statsKey(1), statsKey(2)} {
		if got[k] != 5 || src.dumps[k] != before[k] {
			t.Errorf("%s: served %d connections after %d dumps; want what the other reader saw (5), not dumped again", k, got[k], src.dumps[k]-before[k])
		}
	}
	for _, k := range []ipvs.Key{statsKey(3), statsKey(4)} {
		if got[k] != 2 {
			t.Errorf("%s: served %d connections; want 2: the scrape's dumps go to those no one read", k, got[k])
		}
	}
}
