package nlbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch/nstest"
)

// stableLinks adds n veth pairs, s<i>/p<i>, with 192.0.2.<i>/32 on s<i>.
func stableLinks(t *testing.T, ns *nstest.NS, n int) {
	t.Helper()
	err := ns.Do(func() error {
		for i := 0; i < n; i++ {
			if err := nstest.AddVeth(fmt.Sprintf("s%d", i), fmt.Sprintf("p%d", i), fmt.Sprintf("192.0.2.%d/32", i+1)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func dialIn(t *testing.T, ns *nstest.NS) *Conn {
	t.Helper()
	var c *Conn
	err := ns.Do(func() (err error) {
		if c, err = Dial(unix.NETLINK_ROUTE); err != nil {
			return err
		}
		return c.StrictDumps()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// While links come and go, a link dump the kernel answers in several
// buffers is flagged interrupted, and Dump says so; Links, which retries,
// always lists every link that stayed.
func TestDumpReportsInterruptedDumpsAndLinksRetriesThem(t *testing.T) {
	ns := nstest.New(t)
	stableLinks(t, ns, 60) // 121 links: a dump of several buffers
	c := dialIn(t, ns)
	stop := ns.Churn(t)
	defer stop()

	interrupted := 0
	for i := 0; i < 2000 && interrupted == 0; i++ {
		n := 0
		err := c.Dump(Request{Type: unix.RTM_GETLINK, Data: make([]byte, ifinfomsgLen)}, func([]byte) { n++ })
		switch {
		case errors.Is(err, ErrDumpInterrupted):
			interrupted++
		case err != nil:
			t.Fatal(err)
		}
	}
	if interrupted == 0 {
		t.Fatal("2000 link dumps while links changed, none reported interrupted")
	}
	for i := 0; i < 200; i++ {
		links, err := c.Links()
		if err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 60; j++ {
			name := fmt.Sprintf("s%d", j)
			if !slices.ContainsFunc(links, func(l Link) bool { return l.Name == name }) {
				t.Fatalf("link list %d lacks %s", i, name)
			}
		}
	}
}

// A link's address list is that link's alone; a link deleted since it was
// listed has none, and is no error.
func TestLinkAddressesOfOneLinkAndOfAGoneOne(t *testing.T) {
	ns := nstest.New(t)
	stableLinks(t, ns, 2)
	c := dialIn(t, ns)
	links, err := c.Links()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(links, func(l Link) bool { return l.Name == "s1" })
	if i < 0 {
		t.Fatalf("no s1 in %v", links)
	}
	got, err := c.LinkAddresses(links[i].Index)
	// IPv6 link-local addresses appear only on links that are up.
	if want := []netip.Addr{netip.MustParseAddr("192.0.2.2")}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("addresses of s1: %v, %v; want %v", got, err, want)
	}
	if got, err := c.LinkAddresses(999999); err != nil || len(got) != 0 {
		t.Fatalf("addresses of a missing link: %v, %v; want none, no error", got, err)
	}
	// Appended after what the slice holds, which is kept.
	kept := netip.MustParseAddr("198.51.100.1")
	got, err = c.AppendLinkAddresses(append(make([]netip.Addr, 0, 4), kept), links[i].Index)
	if want := []netip.Addr{kept, netip.MustParseAddr("192.0.2.2")}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("appended addresses of s1: %v, %v; want %v", got, err, want)
	}
}

func TestWholeRetriesOnlyInterruptedReadsAndGivesUp(t *testing.T) {
	calls := 0
	if err := Whole(func() error { calls++; return unix.EPERM }); !errors.Is(err, unix.EPERM) || calls != 1 {
		t.Errorf("a failed read: %v after %d calls, want EPERM after 1", err, calls)
	}
	calls = 0
	if err := Whole(func() error {
		if calls++; calls < 3 {
			return ErrDumpInterrupted
		}
		return nil
	}); err != nil || calls != 3 {
		t.Errorf("interrupted twice: %v after %d calls, want success after 3", err, calls)
	}
	calls = 0
	if err := Whole(func() error { calls++; return ErrDumpInterrupted }); !errors.Is(err, ErrDumpInterrupted) || calls != WholeAttempts {
		t.Errorf("always interrupted: %v after %d calls, want ErrDumpInterrupted after %d", err, calls, WholeAttempts)
	}
}

// A Conn reading a page at a time still reads a dump of many rounds whole;
// a reply bigger than its buffer fails as truncated, and leaves the Conn in
// step.
func TestSmallReadsReadDumpsWholeAndReportCutReplies(t *testing.T) {
	ns := nstest.New(t)
	const n = 300 // ~20 KiB of address messages: several rounds of a page
	err := ns.Do(func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(198, 18, byte(i>>8), byte(i)), Mask: net.CIDRMask(32, 32)}}
			if err := netlink.AddrAdd(lo, a); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := dialIn(t, ns)
	c.SmallReads()
	got, err := c.LinkAddresses(1)
	if err != nil || len(got) != n { // lo is down: no 127.0.0.1
		t.Fatalf("addresses of lo read in pages: %d, %v; want %d", len(got), err, n)
	}

	full := c.rbuf
	c.rbuf = full[:64] // lo's link message is some hundred bytes
	if _, err := c.Get(getLoopback()); !errors.Is(err, ErrTruncated) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("get lo into 64 bytes: %v, want ErrTruncated", err)
	}
	c.rbuf = full
	if reply, err := c.Get(getLoopback()); err != nil || binary.NativeEndian.Uint32(reply[4:8]) != 1 {
		t.Fatalf("get lo afterwards: %v", err)
	}
}
