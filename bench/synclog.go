package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"strings"
	"time"
)

// syncLine is one "synced" line of our proxier's log at -v 4: when the sync
// ended and where its time went. Durations are zap's seconds.
type syncLine struct {
	end                time.Time
	full               bool
	services, ops      int
	took, lockWait     time.Duration
	setup, read, adopt time.Duration
}

// onLoop is the time a sync held the sync goroutine, waiting for its lock
// included: for a full sync, its took less the drift check's setup, read and
// adopt, which ran on the check's own goroutine beside other syncs.
func (l syncLine) onLoop() time.Duration {
	d := l.took + l.lockWait
	if l.full {
		d -= l.setup + l.read + l.adopt
	}
	return max(d, 0)
}

// parseSyncs reads the "synced" lines of a zap console log:
// "2026-11-26T06:16:00.123Z<TAB>debug<TAB>…synced<TAB>{"full": false, …}".
func parseSyncs(r io.Reader) []syncLine {
	var out []syncLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		i := strings.Index(line, "\tsynced\t{")
		if i < 0 {
			continue
		}
		ts, _, _ := strings.Cut(line, "\t")
		end, err := time.Parse("2006-01-02T15:04:05.000Z0700", ts)
		if err != nil {
			continue
		}
		var f struct {
			Full               bool
			Services           int
			KernelOps          int
			Took, LockWait     float64
			Setup, Read, Adopt float64
		}
		if json.Unmarshal([]byte(line[i+len("\tsynced\t"):]), &f) != nil {
			continue
		}
		sec := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
		out = append(out, syncLine{end: end, full: f.Full, services: f.Services, ops: f.KernelOps,
			took: sec(f.Took), lockWait: sec(f.LockWait), setup: sec(f.Setup), read: sec(f.Read), adopt: sec(f.Adopt)})
	}
	return out
}

func readSyncs(path string) []syncLine {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseSyncs(f)
}

// syncStats sums up the syncs of a window.
type syncStats struct {
	count int
	// longest is the longest time a sync held the sync goroutine (onLoop);
	// longestFull a drift check's whole time, its background read included.
	longest, longestFull        time.Duration
	longestServices, longestOps int
	longestEnd                  time.Time
}

// syncsDuring sums up the syncs that ran, at least in part, within
// [from, to]. The log's times have milliseconds: a sync is taken when it
// ended after from and began before to.
func syncsDuring(lines []syncLine, from, to time.Time) syncStats {
	var st syncStats
	for _, l := range lines {
		if l.end.Before(from) || !l.end.Add(-l.onLoop()).Before(to) {
			continue
		}
		st.count++
		if d := l.onLoop(); d > st.longest {
			st.longest, st.longestServices, st.longestOps, st.longestEnd = d, l.services, l.ops, l.end
		}
		if l.full {
			st.longestFull = max(st.longestFull, l.took)
		}
	}
	return st
}

// oneSyncMargin is what a change may take beyond the longest sync and still
// count as delayed by at most that one sync: the default
// --ipvs-min-sync-period (1 s), the rate limit it may wait out after the
// long sync, which also covers its API write, watch event and own sync
// (1k one-change p99: ~120 ms).
const oneSyncMargin = time.Second

// withinOneSync says whether the slowest other change took at most the
// longest sync plus oneSyncMargin.
func withinOneSync(slowest, longestSync time.Duration) bool {
	return slowest <= longestSync+oneSyncMargin
}

// msDuration is a record's milliseconds as a duration.
func msDuration(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
