package ipvs

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// Netlink talks to the kernel's IPVS table through generic netlink: writes
// batched on one socket, reads on others, so a drift check's dumps and a
// sync's writes do not wait for each other's system calls.
type Netlink struct {
	family uint16 // the IPVS generic netlink family's id
	// w writes; r reads virtual servers; d dumps real servers, a virtual
	// server at a time, in small reads (nlbatch.Conn.SmallReads), which
	// would make r's one big dump of every virtual server three times dearer.
	w, r, d *nlbatch.Conn

	tableMu sync.Mutex
	// table is /proc/net/ip_vs of the namespace the sockets are in, kept
	// open so that later reads see that namespace whatever thread reads;
	// nil if it could not be opened.
	table *os.File

	// scratchMu guards scratch, where RealServerStats decodes each dump
	// before copying it out at its size: growing a slice per virtual server
	// cost more than the dump's decoding.
	scratchMu sync.Mutex
	scratch   []RealServerStats

	// statsTap, if set, is given the statistics of every real-server dump
	// RealServers makes (see TapRealServerStats).
	statsTap atomic.Pointer[func(Key, []RealServerStats)]
	// readMu guards the scratch RealServers decodes into before copying
	// out at size, as RealServerStats does.
	readMu      sync.Mutex
	readScratch []RealServer
	tapScratch  []RealServerStats
}

var _ Interface = (*Netlink)(nil)

// NewNetlink opens the IPVS table of the current network namespace. It fails
// with a clear error when the kernel has no IPVS (module not loaded or not built).
func NewNetlink() (*Netlink, error) {
	fam, err := netlink.GenlFamilyGet("IPVS")
	if err != nil {
		return nil, fmt.Errorf("the kernel has no IPVS (load the ip_vs module on the node): %w", err)
	}
	var conns [3]*nlbatch.Conn
	for i := range conns {
		if conns[i], err = nlbatch.Dial(unix.NETLINK_GENERIC); err != nil {
			for _, c := range conns[:i] {
				_ = c.Close()
			}
			return nil, fmt.Errorf("open IPVS netlink: %w", err)
		}
	}
	n := &Netlink{family: fam.ID, w: conns[0], r: conns[1], d: conns[2]}
	n.d.SmallReads()
	// thread-self: the namespace of this thread, where the sockets were
	// just made, rather than of the process's first thread.
	n.table, _ = os.Open("/proc/thread-self/net/ip_vs")
	return n, nil
}

func (n *Netlink) Close() {
	_ = n.w.Close()
	_ = n.r.Close()
	_ = n.d.Close()
	if n.table != nil {
		_ = n.table.Close()
	}
}

// AllRealServers reads every virtual server's real servers from
// /proc/net/ip_vs in one pass (see TableReader).
func (n *Netlink) AllRealServers() (map[Key][]RealServer, error) {
	if n.table == nil {
		return nil, fmt.Errorf("%s could not be opened", procTablePath)
	}
	n.tableMu.Lock()
	defer n.tableMu.Unlock()
	if _, err := n.table.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%s: %w", procTablePath, err)
	}
	return ParseProcTable(n.table)
}

func family(a netip.Addr) uint16 {
	if a.Is4() {
		return syscall.AF_INET
	}
	return syscall.AF_INET6
}

// VirtualServers lists every address/port virtual server (firewall-mark
// services are not ours and are left out).
//
// IPVS resumes its dumps by position and does not flag one its table
// changed under (no NLM_F_DUMP_INTR, as of Linux 6.x); were it to, the
// dump is read again (nlbatch.Whole). A dump can so miss or repeat
// entries; the drift check re-reads alone every virtual server where a dump
// and its belief disagree before acting on it.
func (n *Netlink) VirtualServers() ([]VirtualServer, error) {
	var out []VirtualServer
	err := nlbatch.Whole(func() error {
		out = out[:0]
		return n.r.Dump(nlbatch.Request{Type: n.family, Data: []byte{cmdGetService, genlIPVSv1, 0, 0}}, func(body []byte) {
			if vs, ok := decodeService(body); ok {
				out = append(out, vs)
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list virtual servers: %w", err)
	}
	return out, nil
}

// GetVirtualServer asks the kernel for one virtual server. Listing its real
// servers cannot tell whether it exists: the kernel answers an empty list
// for a missing one.
func (n *Netlink) GetVirtualServer(k Key) (VirtualServer, bool, error) {
	body, err := n.r.Get(nlbatch.Request{Type: n.family, Data: encodeKey(cmdGetService, k)})
	switch {
	case err == nil:
		vs, ok := decodeService(body)
		return vs, ok, nil
	case errors.Is(err, syscall.ESRCH):
		return VirtualServer{}, false, nil
	}
	return VirtualServer{}, false, fmt.Errorf("get virtual server %s: %w", k, err)
}

// RealServers dumps one virtual server's real servers. A drift check makes
// one such request per virtual server: /proc/net/ip_vs has the whole table
// in one file, but the kernel serves it a page per read(2) and walks the
// table from its start for each page, which makes it quadratic (~1.5 s for
// 10k virtual servers in the test VM, where these dumps take ~2 s).
func (n *Netlink) RealServers(k Key) ([]RealServer, error) {
	tap := n.statsTap.Load()
	af := family(k.Address)
	n.readMu.Lock()
	defer n.readMu.Unlock()
	err := nlbatch.Whole(func() error {
		n.readScratch, n.tapScratch = n.readScratch[:0], n.tapScratch[:0]
		return n.d.Dump(nlbatch.Request{Type: n.family, Data: encodeKey(cmdGetDest, k)}, func(body []byte) {
			rs, ok := decodeDest(body, af)
			if !ok {
				return
			}
			n.readScratch = append(n.readScratch, rs)
			if tap != nil {
				n.tapScratch = append(n.tapScratch, RealServerStats{ID: rs.ID(), ActiveConns: rs.ActiveConns, InactiveConns: rs.InactiveConns,
					Counters: decodeCounters(body, attrDest, destStats, destStats64)})
			}
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list real servers of %s: %w", k, err)
	}
	if tap != nil {
		(*tap)(k, slices.Clone(n.tapScratch))
	}
	return append(make([]RealServer, 0, len(n.readScratch)), n.readScratch...), nil
}

// TapRealServerStats gives fn the statistics the kernel sends with every
// real-server dump RealServers makes, so that the drift check's reads,
// made anyway, serve /metrics/ipvs too (see metrics.RollingStats.Saw).
// fn must not block: the drift check waits for it.
func (n *Netlink) TapRealServerStats(fn func(Key, []RealServerStats)) {
	n.statsTap.Store(&fn)
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

// Unconfirmed says whether op may have left the kernel as it asked in spite
// of err: its answer was lost (a batch's acknowledgements overran the
// receive buffer), or the object it adds was there already, or the one it
// deletes was not (an earlier write whose answer was lost, or someone
// else's). Read the object back before calling the write refused.
func Unconfirmed(op Op, err error) bool {
	if errors.Is(err, nlbatch.ErrOutcomeUnknown) {
		return true
	}
	switch op.Kind {
	case AddVS, AddRS:
		return errors.Is(err, syscall.EEXIST) || errors.Is(err, ErrExists)
	case DeleteVS, DeleteRS:
		// ESRCH: no such virtual server; ENOENT: no such real server.
		return errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.ENOENT) || errors.Is(err, ErrNotFound)
	}
	return false
}
