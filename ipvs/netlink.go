package ipvs

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"syscall"

	libipvs "github.com/moby/ipvs"
	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// Netlink talks to the kernel through generic netlink: reads through moby's
// handle, writes batched through our own socket.
type Netlink struct {
	mu     sync.Mutex // the moby handle is not safe for concurrent use
	h      *libipvs.Handle
	w      *nlbatch.Conn
	family uint16 // the IPVS generic netlink family's id
}

var _ Interface = (*Netlink)(nil)

// NewNetlink opens the IPVS table of the current network namespace. It fails
// with a clear error when the kernel has no IPVS (module not loaded or not built).
func NewNetlink() (*Netlink, error) {
	// moby/ipvs misbehaves without the IPVS generic netlink family (it
	// panics in GetConfig), so probe for the family first.
	fam, err := netlink.GenlFamilyGet("IPVS")
	if err != nil {
		return nil, fmt.Errorf("the kernel has no IPVS (load the ip_vs module on the node): %w", err)
	}
	// moby/ipvs reports through logrus; its messages (a failed modprobe in a
	// container without one) would bypass our logger and say nothing new.
	logrus.SetOutput(io.Discard)
	h, err := libipvs.New("")
	if err != nil {
		return nil, fmt.Errorf("open IPVS netlink: %w", err)
	}
	w, err := nlbatch.Dial(unix.NETLINK_GENERIC)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("open IPVS netlink: %w", err)
	}
	return &Netlink{h: h, w: w, family: fam.ID}, nil
}

func (n *Netlink) Close() {
	n.h.Close()
	_ = n.w.Close()
}

func family(a netip.Addr) uint16 {
	if a.Is4() {
		return syscall.AF_INET
	}
	return syscall.AF_INET6
}

func toLib(vs VirtualServer) *libipvs.Service {
	return &libipvs.Service{
		Address:       net.IP(vs.Address.AsSlice()),
		Protocol:      vs.Protocol.Number(),
		Port:          vs.Port,
		AddressFamily: family(vs.Address),
		SchedName:     vs.Scheduler,
		Flags:         vs.Flags,
		Timeout:       vs.Timeout,
		Netmask:       netmask(vs.Address),
	}
}

func keyToLib(k Key) *libipvs.Service {
	return toLib(VirtualServer{Key: k})
}

func fromLib(s *libipvs.Service) (VirtualServer, bool) {
	addr, ok := netip.AddrFromSlice(s.Address)
	if !ok || s.FWMark != 0 {
		return VirtualServer{}, false
	}
	if s.AddressFamily == syscall.AF_INET {
		addr = addr.Unmap()
	}
	return VirtualServer{
		Key:       Key{Address: addr, Protocol: protocolFromNumber(s.Protocol), Port: s.Port},
		Scheduler: s.SchedName,
		Flags:     s.Flags &^ flagHashed,
		Timeout:   s.Timeout,
	}, true
}

// VirtualServers lists every address/port virtual server (firewall-mark
// services are not ours and are left out).
func (n *Netlink) VirtualServers() ([]VirtualServer, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	list, err := n.h.GetServices()
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	out := make([]VirtualServer, 0, len(list))
	for _, s := range list {
		if vs, ok := fromLib(s); ok {
			out = append(out, vs)
		}
	}
	return out, nil
}

// GetVirtualServer asks the kernel for one virtual server. Listing its real
// servers cannot tell whether it exists: the kernel answers an empty list
// for a missing one.
func (n *Netlink) GetVirtualServer(k Key) (VirtualServer, bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s, err := n.h.GetService(keyToLib(k))
	switch {
	case err == nil:
		vs, ok := fromLib(s)
		return vs, ok, nil
	case errors.Is(err, syscall.ESRCH):
		return VirtualServer{}, false, nil
	}
	return VirtualServer{}, false, fmt.Errorf("get virtual server %s: %w", k, err)
}

func (n *Netlink) AllRealServers() (map[Key][]RealServer, error) {
	t, err := readProcTable()
	if err != nil {
		return nil, fmt.Errorf("list real servers: %w", err)
	}
	return t, nil
}

func (n *Netlink) RealServers(k Key) ([]RealServer, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	list, err := n.h.GetDestinations(keyToLib(k))
	if err != nil {
		return nil, fmt.Errorf("list real servers of %s: %w", k, err)
	}
	out := make([]RealServer, 0, len(list))
	for _, d := range list {
		addr, ok := netip.AddrFromSlice(d.Address)
		if !ok {
			continue
		}
		out = append(out, RealServer{
			Address: addr.Unmap(), Port: d.Port, Weight: d.Weight,
			ActiveConns: d.ActiveConnections, InactiveConns: d.InactiveConnections,
		})
	}
	return out, nil
}

// Write sends the ops many to a system call (see package nlbatch).
func (n *Netlink) Write(ops []Op) []error {
	reqs := make([]nlbatch.Request, len(ops))
	for i, op := range ops {
		reqs[i] = nlbatch.Request{Type: n.family, Data: encode(op)}
	}
	errs := n.w.Do(reqs)
	for i, err := range errs {
		if err != nil {
			errs[i] = fmt.Errorf("%s: %w", ops[i], err)
		}
	}
	return errs
}
