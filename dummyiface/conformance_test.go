package dummyiface_test

import (
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/conformance"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch/nstest"
)

// The netlink code's address writes pass the cases the fake passes, here
// on a veth standing in for the dummy link (the host may have no dummy
// driver; e2e runs the same cases on a dummy link in the VM).
func TestNetlinkConforms(t *testing.T) {
	ns := nstest.New(t)
	if err := ns.Do(func() error { return nstest.AddVeth("kip-links", "kip-linksp") }); err != nil {
		t.Fatal(err)
	}
	t.Run("in its namespace", func(t *testing.T) {
		ns.Enter(t)
		conformance.NoLink(t, dummyiface.NewNetlink("kip-none"))
		conformance.Links(t, dummyiface.NewNetlink("kip-links"))
	})
}
