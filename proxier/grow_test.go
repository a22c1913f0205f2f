package proxier

import (
	"fmt"
	"slices"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestSetsGrowBeforeTheyFill: a set about to hold more entries than its
// maxelem is grown first, to twice that rounded up to a power of two, and
// every entry is written; below its size it is left alone.
func TestSetsGrowBeforeTheyFill(t *testing.T) {
	k := fakeKernel{ipvs.NewFake(), dummyiface.NewFake(), ipset.NewFake()}
	_ = k.links.EnsureLink()
	for _, s := range desired.IPv4Sets {
		if s.Name == desired.SetClusterIP {
			s.MaxElem = 4 // as if the cluster had outgrown 65,536
		}
		if err := k.sets.EnsureSet(s); err != nil {
			t.Fatal(err)
		}
	}
	r := k.reconciler()
	for i := 1; i <= 5; i++ {
		r.setService(name(fmt.Sprint(i)), numbered(i, 1))
	}
	mustApply(t, r)
	if n, _ := k.sets.Count(desired.SetClusterIP); n != 5 {
		t.Errorf("%s holds %d entries, want 5", desired.SetClusterIP, n)
	}
	if c, _ := k.sets.Capacity(desired.SetClusterIP); c != 16 {
		t.Errorf("%s can hold %d, want 16", desired.SetClusterIP, c)
	}
	if got := r.takeWork().grown; !slices.Equal(got, []string{desired.SetClusterIP + " to 16"}) {
		t.Errorf("grown %v", got)
	}
	if !slices.Contains(k.ops(), "grow "+desired.SetClusterIP+" 16") {
		t.Error("no grow among the kernel writes")
	}

	for i := 6; i <= 9; i++ {
		r.setService(name(fmt.Sprint(i)), numbered(i, 1))
	}
	mustApply(t, r)
	if slices.ContainsFunc(k.ops(), func(op string) bool { return len(op) > 5 && op[:5] == "grow " }) {
		t.Error("grown again below its size")
	}
}
