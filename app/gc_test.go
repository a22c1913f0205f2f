package app

import "testing"

func TestSteadyGCHeadroomIsBoundedAtLargeHeaps(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 50},         // the runtime said nothing: the default
		{55 * mb, 50},   // 10k Services: 50%, 27 MB
		{64 * mb, 50},   // 50% is the whole budget
		{256 * mb, 12},  // 50k Services: 32 MB, not 128
		{320 * mb, 10},  // 32 MB would be 10%
		{2048 * mb, 10}, // never under 10%: GC would run all the time
	} {
		if got := steadyGCPercentFor(c.live); got != c.want {
			t.Errorf("steadyGCPercentFor(%d MB) = %d, want %d", c.live/mb, got, c.want)
		}
	}
}
