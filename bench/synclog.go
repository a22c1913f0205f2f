package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"time"
)

// syncLine is one "synced" line of our proxier's log at -v 4: when the sync
// ended and where its time went.
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

// parseSyncs reads the "synced" lines of a JSON log (the bench runs our
// proxier, and the code before, with --logging-format=json). Either form
// is read: component-base's, {"ts":<ms since the epoch>,...,"took":"12ms"},
// and the zap production JSON of older builds, {"ts":"2026-…Z",...,
// "took":0.012}.
func parseSyncs(r io.Reader) []syncLine {
	var out []syncLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"msg":"synced"`)) {
			continue
		}
		var f struct {
			TS                 json.RawMessage
			Msg                string
			Full               bool
			Services           int
			KernelOps          int
			Took, LockWait     logDuration
			Setup, Read, Adopt logDuration
		}
		if json.Unmarshal(line, &f) != nil || f.Msg != "synced" {
			continue
		}
		end, ok := logTime(f.TS)
		if !ok {
			continue
		}
		out = append(out, syncLine{end: end, full: f.Full, services: f.Services, ops: f.KernelOps,
			took: time.Duration(f.Took), lockWait: time.Duration(f.LockWait), setup: time.Duration(f.Setup),
			read: time.Duration(f.Read), adopt: time.Duration(f.Adopt)})
	}
	return out
}

// logTime reads a line's ts: milliseconds since the epoch, or an ISO 8601
// string.
func logTime(ts json.RawMessage) (time.Time, bool) {
	var ms float64
	if json.Unmarshal(ts, &ms) == nil {
		return time.UnixMicro(int64(ms * 1000)), true
	}
	var s string
	if json.Unmarshal(ts, &s) != nil {
		return time.Time{}, false
	}
	t, err := time.Parse("2006-01-02T15:04:05.000Z0700", s)
	return t, err == nil
}

// logDuration is a duration field: a string such as "12ms", or seconds.
type logDuration time.Duration

func (d *logDuration) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := time.ParseDuration(s)
		*d = logDuration(v)
		return err
	}
	var sec float64
	if err := json.Unmarshal(b, &sec); err != nil {
		return err
	}
	*d = logDuration(sec * float64(time.Second))
	return nil
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
