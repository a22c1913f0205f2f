package dummyiface

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// Router is the local routes of --ipvs-vip-mode=local-route: one route of
// type local in the local table makes a whole Service CIDR an address of
// the node, which IPVS sees every packet to, instead of an address bound
// per Service. The routes go through the loopback link, not kube-ipvs0:
// the kernel deletes every IPv4 route through a link when its last IPv4
// address goes (fib_disable_ip), which unbinding the last cluster IP from
// kube-ipvs0 would do, and refuses an IPv6 local route through a link that
// is down, as kube-ipvs0 is. They are told from others by their protocol
// number, routeProtocol.
type Router interface {
	// LocalRoutes lists our local routes.
	LocalRoutes() ([]netip.Prefix, error)
	// SetLocalRoutes adds the missing of want and deletes the others.
	SetLocalRoutes(want []netip.Prefix) error
}

// routeProtocol marks our routes ("proto 176" in ip route's output); no
// routing daemon iproute2 knows uses it.
const routeProtocol = 176

var _ Router = (*Netlink)(nil)

func (n *Netlink) LocalRoutes() ([]netip.Prefix, error) {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return nil, fmt.Errorf("look up link lo: %w", err)
	}
	return localRoutes(lo.Attrs().Index)
}

func localRoutes(index int) ([]netip.Prefix, error) {
	var out []netip.Prefix
	err := nlbatch.Whole(func() error {
		out = out[:0]
		routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL,
			&netlink.Route{Table: unix.RT_TABLE_LOCAL, LinkIndex: index}, netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF)
		if errors.Is(err, netlink.ErrDumpInterrupted) {
			return nlbatch.ErrDumpInterrupted
		}
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Type != unix.RTN_LOCAL || r.Protocol != routeProtocol || r.Dst == nil {
				continue
			}
			if p, ok := prefixOf(r.Dst); ok {
				out = append(out, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list local routes: %w", err)
	}
	return out, nil
}

func (n *Netlink) SetLocalRoutes(want []netip.Prefix) error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("look up link lo: %w", err)
	}
	index := lo.Attrs().Index
	have, err := localRoutes(index)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range want {
		if slices.Contains(have, p) {
			continue
		}
		if err := netlink.RouteAdd(localRoute(index, p)); err != nil && !errors.Is(err, syscall.EEXIST) {
			errs = append(errs, fmt.Errorf("add local route %s: %w", p, err))
		}
	}
	for _, p := range have {
		if slices.Contains(want, p) {
			continue
		}
		if err := netlink.RouteDel(localRoute(index, p)); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("delete local route %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// localRoute is "local p dev lo table local scope host proto 176".
func localRoute(index int, p netip.Prefix) *netlink.Route {
	return &netlink.Route{LinkIndex: index, Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())},
		Table: unix.RT_TABLE_LOCAL, Type: unix.RTN_LOCAL, Scope: netlink.SCOPE_HOST, Protocol: routeProtocol}
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), bits), true
}

var _ Router = (*Fake)(nil)

func (f *Fake) LocalRoutes() ([]netip.Prefix, error) {
	if _, err := f.ops.Begin("list-routes"); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.routes), nil
}

func (f *Fake) SetLocalRoutes(want []netip.Prefix) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Exist = true // as Netlink, which creates the link it routes through
	var errs []error
	for _, p := range want {
		if !slices.Contains(f.routes, p) {
			op := "add-route " + p.String()
			if err := f.write(op); err != nil {
				errs = append(errs, err)
				continue
			}
			f.routes = append(f.routes, p)
		}
	}
	f.routes = slices.DeleteFunc(f.routes, func(p netip.Prefix) bool {
		if slices.Contains(want, p) {
			return false
		}
		if err := f.write("delete-route " + p.String()); err != nil {
			errs = append(errs, err)
			return false
		}
		return true
	})
	return errors.Join(errs...)
}

// write records op, unless the hook fails it; f.mu is held.
func (f *Fake) write(op string) error {
	answer, err := f.ops.Begin(op)
	if err != nil {
		return err
	}
	f.ops.Record(op)
	return answer
}
