package metrics

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// statsOf makes n virtual servers of reals real servers each, their
// figures from base.
func statsOf(n, reals int, base uint64) ([]ipvs.VirtualServerStats, map[ipvs.Key]string) {
	stats := make([]ipvs.VirtualServerStats, n)
	owners := map[ipvs.Key]string{}
	for i := range stats {
		k := ipvs.Key{Address: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)}), Port: 80, Protocol: ipvs.TCP}
		stats[i] = ipvs.VirtualServerStats{Key: k, Counters: ipvs.Counters{Connections: base + uint64(i)}}
		for j := range reals {
			stats[i].Reals = append(stats[i].Reals, ipvs.RealServerStats{ID: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(j)}), 8080),
				ActiveConns: int32(j), Counters: ipvs.Counters{Connections: base + uint64(j), BytesOut: base << 10}})
		}
		owners[k] = fmt.Sprintf("ns/svc-%d", i)
	}
	return stats, owners
}

// TestGzippedScrapeIsThePlainText: scrape after scrape, as virtual servers,
// real servers' figures and Services change, the gzipped text reads back
// as the plain text of the same statistics; the runs nothing changed in
// are written as compressed before, the others compressed anew.
func TestGzippedScrapeIsThePlainText(t *testing.T) {
	g := newGzipText()
	stats, owners := statsOf(600, 3, 1)
	check := func(step string) map[ipvs.Key]*run {
		t.Helper()
		var plain bytes.Buffer
		w := bufio.NewWriter(&plain)
		writeIPVSStats(w, stats, owners, time.Second)
		_ = w.Flush()
		var z bytes.Buffer
		if err := g.write(&z, stats, owners, time.Second); err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(&z)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		zr.Multistream(false)
		got, err := io.ReadAll(zr)
		if err != nil {
			t.Fatalf("%s: read back: %v", step, err)
		}
		if !bytes.Equal(got, plain.Bytes()) {
			t.Fatalf("%s: the gzipped text (%d bytes) is not the plain text (%d bytes)", step, len(got), plain.Len())
		}
		runs := map[ipvs.Key]*run{}
		for k, r := range g.runs {
			runs[k] = r
		}
		return runs
	}
	first := check("first scrape")
	if len(first) < 3 {
		t.Fatalf("600 virtual servers in %d runs; want several", len(first))
	}
	same := check("nothing changed")
	for k, r := range same {
		if first[k] != r {
			t.Fatalf("nothing changed, yet the run at %s was compressed anew", k)
		}
	}

	stats[10].Reals = slices.Clone(stats[10].Reals)
	stats[10].Reals[1].BytesIn++
	owners[stats[400].Key] = "ns/renamed"
	stats = slices.Delete(stats, 200, 201)
	extra, _ := statsOf(1, 2, 9)
	extra[0].Key.Port = 81
	stats = slices.Insert(stats, 300, extra[0])
	changed := []ipvs.Key{stats[10].Key, stats[399].Key, stats[199].Key, stats[300].Key}
	after := check("four virtual servers changed")
	anew := 0
	for k, r := range after {
		if same[k] != r {
			anew++
		}
	}
	if anew == 0 || anew > 2*len(changed) {
		t.Fatalf("%d of %d runs compressed anew after changes in 4 virtual servers", anew, len(after))
	}
}
