package reconciler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
)

// Replacing every Service's endpoint, with the deletes interleaved per
// virtual server, would fill the kernel's dest trash that each later add
// searches. Every add and update of a sync is written before any delete,
// across more ops than one write holds.
func TestDeletesFollowEveryAddOfASync(t *testing.T) {
	k := fakekernel.New(t)
	r := testReconciler(k)
	n := opsPerWrite + 10 // more adds than one write holds
	vip := func(i int) string { return fmt.Sprintf("10.96.%d.%d", i>>8, i&0xff) }
	for i := range n {
		record(r, fmt.Sprint(i), state(vip(i), 80, "10.244.0.1:8080"))
	}
	record(r, "gone", state("10.97.0.1", 80, "10.244.0.1:8080"))
	mustSync(t, r)
	mustCheck(t, r) // the kernel read: no real server carries connections
	k.IPVS.TakeOps()

	for i := range n {
		record(r, fmt.Sprint(i), state(vip(i), 80, "10.244.0.2:8080"))
	}
	record(r, "gone", desired.State{})
	mustSync(t, r)
	ops := k.IPVS.TakeOps()
	adds, deletes, firstDelete := 0, 0, -1
	for i, op := range ops {
		switch {
		case strings.HasPrefix(op, "delete-"):
			deletes++
			if firstDelete < 0 {
				firstDelete = i
			}
		case strings.HasPrefix(op, "add-"):
			adds++
			if firstDelete >= 0 {
				t.Fatalf("op %d %q follows delete %d %q", i, op, firstDelete, ops[firstDelete])
			}
		}
	}
	// A sync reads at most drainReadsMax virtual servers' connections;
	// the real servers of the others drain rather than go.
	if adds != n || deletes < drainReadsMax {
		t.Fatalf("%d adds and %d deletes, want %d and at least %d", adds, deletes, n, drainReadsMax)
	}
}
