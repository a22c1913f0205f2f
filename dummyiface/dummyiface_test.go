package dummyiface

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch/nstest"
)

// The link's addresses are listed whole and alone while other links, with
// addresses of their own, come and go: no read fails, none lacks one.
func TestAddressesAreTheLinksAloneWhileLinksChange(t *testing.T) {
	ns := nstest.New(t)
	var want []netip.Addr
	err := ns.Do(func() error {
		var addrs []string
		for i := 0; i < 200; i++ {
			a := netip.AddrFrom4([4]byte{10, 96, byte(i / 250), byte(1 + i%250)})
			want = append(want, a)
			addrs = append(addrs, a.String()+"/32")
		}
		if err := nstest.AddVeth("vips", "vipsp", addrs...); err != nil {
			return err
		}
		return nstest.AddVeth("other", "otherp", "192.0.2.1/32")
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(want, netip.Addr.Compare)
	stop := ns.Churn(t)
	defer stop()
	n := NewNetlink("vips")
	err = ns.Do(func() error {
		for i := 0; i < 300; i++ {
			got, err := n.Addresses()
			if err != nil {
				return fmt.Errorf("read %d: %w", i, err)
			}
			slices.SortFunc(got, netip.Addr.Compare)
			if !slices.Equal(got, want) {
				return fmt.Errorf("read %d: %d addresses %v..., want the link's %d", i, len(got), got[:min(len(got), 3)], len(want))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := NewNetlink("missing").Addresses(); err != nil || len(got) != 0 {
		t.Fatalf("a missing link: %v, %v; want none", got, err)
	}
}
