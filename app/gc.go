package app

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The steady state's garbage collector. Go's default GOGC of 100 lets the
// heap grow to twice what is live before collecting: at 10k Services
// ~110 MB live meant ~300 MB RSS. A node agent should be frugal, and
// between changes the proxier allocates little (the drift check's read,
// bounded in size), so it collects at 1.5x the live heap, and at large
// heaps sooner: the steady state's garbage does not grow with the live
// heap, so neither need the headroom that holds it. The cold start keeps
// Go's default: it allocates fast (decoding every object), where a tighter
// GC means more collections for a peak that is returned right after.
// GOGC in the environment turns this off; GOMEMLIMIT adds its cap to it.
const (
	steadyGCPercent  = 50       // GOGC while 50% of the live heap is within steadyGCHeadroom
	steadyGCHeadroom = 32 << 20 // bytes the heap may grow past its live size, at most...
	minGCPercent     = 10       // ...unless that is under 10% of it
	gcTuneEvery      = time.Minute
)

// steadyGCPercentFor is GOGC for a live heap of live bytes.
func steadyGCPercentFor(live uint64) int {
	if live == 0 {
		return steadyGCPercent
	}
	p := int(min(uint64(steadyGCPercent), steadyGCHeadroom*100/live))
	return max(p, minGCPercent)
}

// afterFirstSync returns the first sync's peak (the informers' lists, every
// Service computed at once) to the node now rather than over the runtime's
// slow scavenging, and keeps the GC tight for the steady state until ctx
// ends, re-reading the live heap each minute as Services come and go.
func afterFirstSync(ctx context.Context) {
	debug.FreeOSMemory()
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(steadyGCPercentFor(liveHeap()))
	go func() {
		t := time.NewTicker(gcTuneEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				debug.SetGCPercent(steadyGCPercentFor(liveHeap()))
			}
		}
	}()
}

// liveHeap is the heap the last collection found live, in bytes (0 if the
// runtime does not say).
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
