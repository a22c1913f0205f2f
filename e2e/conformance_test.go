//go:build e2e

package e2e

import (
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/conformance"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestFakesMatchTheKernel runs the cases the unit tests' fakes pass
// (internal/conformance) against the kernel's tables, in a network
// namespace of their own: what the fakes claim of the kernel holds. The
// cases run on the namespace's thread, as the dummy link's calls look
// the link up in the calling thread's namespace, and iptables runs in the
// namespace of the thread that starts it.
func TestFakesMatchTheKernel(t *testing.T) {
	t.Parallel()
	inNetns(t, "kip-conformance", func() {
		v, err := ipvs.NewNetlink()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		conformance.IPVS(t, v)
		s, err := ipset.NewNetlink()
		if err != nil {
			t.Fatal(err)
		}
		conformance.Sets(t, s)
		links := dummyiface.NewNetlink("kip-conf0")
		conformance.NoLink(t, links)
		conformance.Links(t, links)
		ipt, err := iptables.NewIPv4()
		if err != nil {
			t.Fatal(err)
		}
		conformance.IPTables(t, ipt)
	})
}
