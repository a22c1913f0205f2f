// Package nstest runs netlink tests in a network namespace of their own,
// where they may add and delete links without touching the host's.
package nstest

import (
	"fmt"
	"net"
	"runtime"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// NS is a network namespace, kept while the test runs.
type NS struct{ fd int }

// New makes a namespace, or skips the test where that is not allowed.
func New(t testing.TB) *NS {
	t.Helper()
	fd := make(chan int, 1)
	errs := make(chan error, 1)
	go func() {
		// The thread is never unlocked: it goes with the goroutine, and its
		// namespace with it, rather than back to the pool.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errs <- err
			return
		}
		f, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errs <- err
			return
		}
		fd <- f
	}()
	select {
	case err := <-errs:
		t.Skipf("no network namespace of our own here: %v", err)
	case f := <-fd:
		t.Cleanup(func() { unix.Close(f) })
		return &NS{fd: f}
	}
	return nil
}

// Enter moves the calling goroutine into the namespace for good: its
// thread is never unlocked, and ends with the goroutine. Call it from a
// subtest's own goroutine, so that t.Fatal ends the subtest as usual.
func (n *NS) Enter(t testing.TB) {
	t.Helper()
	runtime.LockOSThread()
	if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
		t.Fatalf("enter namespace: %v", err)
	}
}

// Do runs f on a thread in the namespace; sockets it opens stay there.
func (n *NS) Do(f func() error) error {
	errs := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see New
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			errs <- fmt.Errorf("enter namespace: %w", err)
			return
		}
		errs <- f()
	}()
	return <-errs
}

// AddVeth adds the veth pair name/peer, with addrs (CIDR notation) on name.
func AddVeth(name, peer string, addrs ...string) error {
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
		return fmt.Errorf("add veth %s: %w", name, err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		ip, ipnet, err := net.ParseCIDR(a)
		if err != nil {
			return err
		}
		ipnet.IP = ip
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: ipnet}); err != nil {
			return fmt.Errorf("add %s to %s: %w", a, name, err)
		}
	}
	return nil
}

// Churn adds and deletes a veth pair with an address, over and over, as
// pods starting and stopping do, until the returned stop is called.
func (n *NS) Churn(t testing.TB) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := n.Do(func() error {
			for i := 0; ; i++ {
				select {
				case <-done:
					return nil
				default:
				}
				name := fmt.Sprintf("churn%d", i%4)
				if err := AddVeth(name, name+"p", "198.51.100.1/32"); err != nil {
					return err
				}
				link, err := netlink.LinkByName(name)
				if err != nil {
					return err
				}
				if err := netlink.LinkDel(link); err != nil {
					return err
				}
			}
		})
		if err != nil {
			t.Errorf("churn: %v", err)
		}
	}()
	return func() { close(done); wg.Wait() }
}
