package reconciler

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
)

// TestSetsGrowBeforeTheyFill: a set about to hold more entries than its
// maxelem is grown first, to twice that rounded up to a power of two, and
// every entry is written; below its size it is left alone.
func TestSetsGrowBeforeTheyFill(t *testing.T) {
	k := fakekernel.Bare()
	_ = k.Links.EnsureLink()
	for _, s := range desired.IPv4Sets {
		if s.Name == desired.SetClusterIP {
			s.MaxElem = 4 // as if the cluster had outgrown 65,536
		}
		if err := k.Sets.EnsureSet(s); err != nil {
			t.Fatal(err)
		}
	}
	r := testReconciler(k)
	for i := 1; i <= 5; i++ {
		record(r, fmt.Sprint(i), numbered(i, 1))
	}
	mustSync(t, r)
	if n, _ := k.Sets.Count(desired.SetClusterIP); n != 5 {
		t.Errorf("%s holds %d entries, want 5", desired.SetClusterIP, n)
	}
	if c, _ := k.Sets.Capacity(desired.SetClusterIP); c != 16 {
		t.Errorf("%s can hold %d, want 16", desired.SetClusterIP, c)
	}
	if got := r.Outcome().Grown; !slices.Equal(got, []string{desired.SetClusterIP + " to 16"}) {
		t.Errorf("grown %v", got)
	}
	if !slices.Contains(k.Ops(), "grow "+desired.SetClusterIP+" 16") {
		t.Error("no grow among the kernel writes")
	}

	for i := 6; i <= 9; i++ {
		record(r, fmt.Sprint(i), numbered(i, 1))
	}
	mustSync(t, r)
	if slices.ContainsFunc(k.Ops(), func(op string) bool { return len(op) > 5 && op[:5] == "grow " }) {
		t.Error("grown again below its size")
	}
}
