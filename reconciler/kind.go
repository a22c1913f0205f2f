package reconciler

import (
	"slices"
	"time"
)

// kind is one kind of kernel object as apply writes it. writeKind drives
// every kind the same way: it asks plan for the writes of each dirty key,
// sends them in batches with write, and gives the answers to record. Virtual
// servers (with their real servers as members), addresses and ipset entries
// are kinds; the iptables payload is not, because it is one text written
// whole (package glue).
type kind[K comparable, O any] interface {
	// plan adds to p the writes that make k as wanted, as the kernel is
	// believed to hold it, leaving out those whose retry is not due
	// (waits says some were); a key with nothing to write is done.
	plan(k K, now time.Time, p *plans[O]) (waits bool)
	// write sends ops, all puts or all removals, and returns the kernel's
	// answer to each, and an error of the batch as a whole (an ipset it
	// could not grow) that leaves the answers standing.
	write(ops []O, removals bool) (answers []error, err error)
	// record takes the answers: a write the kernel accepted (or whose
	// outcome, read back, is as asked) is believed and its object done; a
	// refused one's key goes to pending with its failure. It says how
	// many were written and returns the refusals.
	record(ops []O, answers []error, removals bool, now time.Time, pending map[K]bool) (written int, errs []error)
}

// plans are the writes planned for one kind: puts (additions and updates)
// and removals.
type plans[O any] struct{ puts, removals []O }

// opsPerWrite is how many writes writeKind plans before it sends them: a few
// netlink batches' worth. A cold start's 140k IPVS writes planned at once
// held 30 MB of plans at the peak, for no fewer system calls.
const opsPerWrite = 4096

// lane is what writing one kind of kernel object did in an apply.
type lane struct {
	errs []error
	ops  int
	took time.Duration
}

// writeKind writes the dirty keys of one kind: puts first, a batch at a time
// as they are planned, so new Services answer as early as possible; then
// every removal. Removals wait for the puts because the kernel parks a
// deleted real server in its dest trash for minutes and looks each new one
// up there first: adds after many deletes are quadratic
// (docs/performance.md). What failed or waits for its retry stays dirty.
func writeKind[K comparable, O any](kd kind[K, O], dirty keys[K], now time.Time) lane {
	start := time.Now()
	var l lane
	pending := map[K]bool{}
	send := func(ops []O, removals bool) {
		if len(ops) == 0 {
			return
		}
		answers, err := kd.write(ops, removals)
		n, errs := kd.record(ops, answers, removals, now, pending)
		l.ops += n
		l.errs = append(l.errs, errs...)
		if err != nil {
			l.errs = append(l.errs, err)
		}
	}
	var p plans[O]
	for k := range dirty.each() {
		if kd.plan(k, now, &p) {
			pending[k] = true
		}
		if len(p.puts) >= opsPerWrite {
			send(p.puts, false)
			p.puts = p.puts[:0]
		}
	}
	send(p.puts, false)
	for chunk := range slices.Chunk(p.removals, opsPerWrite) {
		send(chunk, true)
	}
	dirty.settle(pending)
	l.took = time.Since(start)
	return l
}

// memberTable is a kind of object that is only present or absent in the
// kernel (addresses, ipset entries).
type memberTable[K comparable] = table[K, struct{}, struct{}]

// members is the kind of a member table: its writes are its keys. send
// writes them (adds or deletes), and held reads back which of some keys
// the kernel holds, for writes whose answer was lost (see readback.go).
type members[K comparable] struct {
	t    *memberTable[K]
	send func(keys []K, removals bool) ([]error, error)
	held func([]K) (map[K]bool, error)
	// waits, if set, says a key cannot be written yet and is no failure:
	// it stays dirty, unplanned (an entry of a set the kernel refused).
	waits func(K) bool
}

func (m members[K]) plan(k K, now time.Time, p *plans[K]) bool {
	_, want := m.t.want[k]
	_, held := m.t.have[k]
	switch {
	case want == held:
		m.t.status.OK(k)
	case m.t.status.Waiting(k, now):
		return true
	case m.waits != nil && m.waits(k):
		return true
	case want:
		p.puts = append(p.puts, k)
	default:
		p.removals = append(p.removals, k)
	}
	return false
}

func (m members[K]) write(keys []K, removals bool) ([]error, error) { return m.send(keys, removals) }

// record believes the keys written; keys whose answer was lost are read back
// first, and those the kernel holds as asked count as written.
func (m members[K]) record(keys []K, answers []error, removals bool, now time.Time, pending map[K]bool) (int, []error) {
	var unknown []K
	for i, err := range answers {
		if err != nil && unknownOutcome(err) {
			unknown = append(unknown, keys[i])
		}
	}
	var seen map[K]bool
	if len(unknown) > 0 {
		seen, _ = m.held(unknown) // what it could not read stays failed
	}
	var errs []error
	n := 0
	for i, err := range answers {
		k := keys[i]
		m.t.wrote(k)
		if present, read := seen[k]; err != nil && read && present != removals {
			err = nil
		}
		if err != nil {
			errs = append(errs, err)
			pending[k] = true
			m.t.status.Fail(k, err, now, m.t.want.Owner(k))
			continue
		}
		m.t.status.OK(k)
		believeIf(m.t, k, !removals)
		n++
	}
	return n, errs
}
