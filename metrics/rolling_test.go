package metrics

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

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

// tappingStats is a countingStats that hands on its tap (ipvs.StatsTap),
// and calls during before each real-server dump.
type tappingStats struct {
	countingStats
	tap    func(ipvs.Key, []ipvs.RealServerStats)
	during func(ipvs.Key)
}

func (s *tappingStats) TapRealServerStats(fn func(ipvs.Key, []ipvs.RealServerStats)) { s.tap = fn }

func (s *tappingStats) RealServerStats(k ipvs.Key) ([]ipvs.RealServerStats, error) {
	if s.during != nil {
		s.during(k)
	}
	return s.countingStats.RealServerStats(k)
}

// TestRollingStatsServesWhatOthersRead: a scrape taps its source, and real
// servers another reader dumped through the tap since the last scrape
// (the drift check) are served in place of the dumps the budget leaves
// out; below the budget every virtual server is dumped all the same. One
// dumped during a scrape that dumps the same virtual server is dropped
// (it may be the older: counters would go back). Nothing is kept before
// the first scrape, nor once scrapes have stopped for a while.
func TestRollingStatsServesWhatOthersRead(t *testing.T) {
	now := time.Unix(1000, 0)
	src := &tappingStats{countingStats: countingStats{dumps: map[ipvs.Key]int{}}}
	for i := 1; i <= 4; i++ {
		src.keys = append(src.keys, statsKey(i))
	}
	r := &RollingStats{Source: src, DumpsMax: 2, Clock: func() time.Time { return now }}
	seen := func(k ipvs.Key, conns uint64) {
		src.tap(k, []ipvs.RealServerStats{{ID: netip.MustParseAddrPort("10.244.0.1:8080"), Counters: ipvs.Counters{Connections: conns}}})
	}
	read := func() map[ipvs.Key]uint64 {
		t.Helper()
		vss, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		got := map[ipvs.Key]uint64{}
		for _, vs := range vss {
			got[vs.Key] = vs.Reals[0].Connections
		}
		return got
	}
	src.conns = 1
	read()
	if src.tap == nil {
		t.Fatal("the scrape did not tap its source")
	}

	src.conns = 2
	seen(statsKey(1), 5)
	seen(statsKey(2), 5)
	got := read()
	for k, want := range map[ipvs.Key]uint64{statsKey(1): 5, statsKey(2): 5, statsKey(3): 2, statsKey(4): 2} {
		if got[k] != want {
			t.Errorf("%s: served %d connections, want %d (the other reader's 5 in place of the budget's dumps)", k, got[k], want)
		}
	}

	// Dumped by another reader while the scrape dumps it too.
	src.conns = 3
	src.during = func(k ipvs.Key) {
		if k == statsKey(1) {
			seen(statsKey(2), 2)
		}
	}
	read() // dumps 1 and 2 (all four read last time; the first two of them)
	src.during = nil
	src.conns = 4
	if got := read(); got[statsKey(2)] != 3 { // dumps 3 and 4
		t.Errorf("%s: served %d connections after a scrape read 3; an older read made during it set it back", statsKey(2), got[statsKey(2)])
	}

	all := &RollingStats{Source: src, DumpsMax: 10}
	all.Read()
	src.conns = 5
	src.tap(statsKey(1), []ipvs.RealServerStats{{ID: netip.MustParseAddrPort("10.244.0.1:8080"), Counters: ipvs.Counters{Connections: 9}}})
	vss, _ := all.Read()
	for _, vs := range vss {
		if vs.Reals[0].Connections != 5 {
			t.Errorf("below the budget, %s served %d connections, want its fresh dump's 5", vs.Key, vs.Reals[0].Connections)
		}
	}

	fresh := &RollingStats{Source: &tappingStats{countingStats: countingStats{dumps: map[ipvs.Key]int{}}}, Clock: func() time.Time { return now }}
	fresh.Saw(statsKey(1), nil)
	if fresh.seen != nil {
		t.Error("real servers seen before the first scrape were kept")
	}
	fresh.Read()
	now = now.Add(seenFor + time.Second)
	fresh.Saw(statsKey(1), nil)
	if fresh.seen != nil {
		t.Error("real servers seen long after the last scrape were kept")
	}
}
