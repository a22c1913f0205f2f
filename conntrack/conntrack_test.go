package conntrack

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestFilterMatchesOnlyFlowsAnsweredByOthers(t *testing.T) {
	ap := netip.MustParseAddrPort
	f := newFilter([]Stale{{VIP: ap("10.96.0.10:53"), Keep: []netip.AddrPort{ap("10.244.0.2:5353")}}})
	flow := func(proto uint8, dst, reply string) *netlink.ConntrackFlow {
		d, r := ap(dst), ap(reply)
		fl := &netlink.ConntrackFlow{}
		fl.Forward.Protocol = proto
		fl.Forward.DstIP, fl.Forward.DstPort = net.IP(d.Addr().AsSlice()).To16(), d.Port()
		fl.Reverse.SrcIP, fl.Reverse.SrcPort = net.IP(r.Addr().AsSlice()), r.Port()
		return fl
	}
	cases := []struct {
		name  string
		flow  *netlink.ConntrackFlow
		match bool
	}{
		{"answered by a removed pod", flow(unix.IPPROTO_UDP, "10.96.0.10:53", "10.244.0.9:5353"), true},
		{"answered by a kept pod", flow(unix.IPPROTO_UDP, "10.96.0.10:53", "10.244.0.2:5353"), false},
		{"kept pod, other port", flow(unix.IPPROTO_UDP, "10.96.0.10:53", "10.244.0.2:5354"), true},
		{"another virtual server", flow(unix.IPPROTO_UDP, "10.96.0.11:53", "10.244.0.9:5353"), false},
		{"TCP to the same address", flow(unix.IPPROTO_TCP, "10.96.0.10:53", "10.244.0.9:5353"), false},
	}
	for _, c := range cases {
		if got := f.MatchConntrackFlow(c.flow); got != c.match {
			t.Errorf("%s: match %v, want %v", c.name, got, c.match)
		}
	}
}

func TestSettingsAsUpstream(t *testing.T) {
	s := Settings{MaxPerCore: 32768, Min: 131072, TCPEstablished: 24 * time.Hour, TCPCloseWait: time.Hour}
	got := s.Sysctls()
	want := map[string]string{
		"net/netfilter/nf_conntrack_tcp_timeout_established": "86400",
		"net/netfilter/nf_conntrack_tcp_timeout_close_wait":  "3600",
	}
	if !maps.Equal(got, want) {
		t.Errorf("sysctls %v, want %v", got, want)
	}
	if m := s.Max(2); m != 131072 {
		t.Errorf("2 cores: max %d, want 131072 (2 × 32768 is below min)", m)
	}
	if m := s.Max(8); m != 262144 {
		t.Errorf("8 cores: max %d, want 262144", m)
	}
	// kube-proxy v1.37 caps the product at 1,048,576, before it takes min.
	if m := s.Max(64); m != 1048576 {
		t.Errorf("64 cores: max %d, want the cap 1048576", m)
	}
	if m := (Settings{MaxPerCore: 32768, Min: 2 << 20}).Max(64); m != 1048576 {
		t.Errorf("64 cores, min above the cap: max %d, want 1048576 as upstream", m)
	}
	if m := (Settings{Min: 131072}).Max(8); m != 0 {
		t.Errorf("no max per core: max %d, want 0 (left as is)", m)
	}
	s = Settings{UDP: 30 * time.Second, UDPStream: 2 * time.Minute, TCPBeLiberal: true}
	if got := s.Sysctls(); got["net/netfilter/nf_conntrack_udp_timeout"] != "30" || got["net/netfilter/nf_conntrack_udp_timeout_stream"] != "120" ||
		got["net/netfilter/nf_conntrack_tcp_be_liberal"] != "1" || len(got) != 3 {
		t.Errorf("udp and liberal: %v", got)
	}
}

// An interrupted table dump may have missed stale flows: Clear passes over
// the table again, counting what every pass deleted, and reports only what
// the last pass says.
func TestClearPassesAgainOverAnInterruptedDump(t *testing.T) {
	answers := []struct {
		n   uint
		err error
	}{{2, netlink.ErrDumpInterrupted}, {1, netlink.ErrDumpInterrupted}, {3, nil}}
	made := 0
	n, err := passes(func() (uint, error) {
		a := answers[made]
		made++
		return a.n, a.err
	})
	if n != 6 || err != nil || made != 3 {
		t.Fatalf("passes = %d, %v after %d passes; want 6, nil after 3", n, err, made)
	}
}

// The table is raised to what is asked, never lowered (kube-proxy v1.37).
func TestRaiseMaxNeverLowers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nf_conntrack_max")
	for _, c := range []struct{ had, want, left string }{{"65536", "131072", "131072"}, {"262144", "131072", "262144"}} {
		if err := os.WriteFile(path, []byte(c.had+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(c.want)
		if err := raise(path, n); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); strings.TrimSpace(string(got)) != c.left {
			t.Errorf("had %s, asked %s: left %s, want %s", c.had, c.want, got, c.left)
		}
	}
}

func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{"0\n": 1, "0-3\n": 4, "0-3,6\n": 5, "0,2,4-7": 6} {
		if n, ok := countCPUList(in); !ok || n != want {
			t.Errorf("countCPUList(%q) = %d, %v; want %d", in, n, ok, want)
		}
	}
	for _, bad := range []string{"", "\n", "a-b", "3-1", "0-"} {
		if n, ok := countCPUList(bad); ok {
			t.Errorf("countCPUList(%q) = %d, want refused", bad, n)
		}
	}
}

// TestNodeCPUsCountsOnlineCPUsNotTheCpuset: under a pinned cpuset (kubelet's
// static CPU policy), the table is still sized by the node's CPUs. The
// test binary runs itself again pinned to one CPU, as runtime.NumCPU is
// read once at start.
func TestNodeCPUsCountsOnlineCPUsNotTheCpuset(t *testing.T) {
	if os.Getenv("KIP_PRINT_NODE_CPUS") != "" {
		fmt.Printf("cpus=%d\n", NodeCPUs())
		return
	}
	b, err := os.ReadFile(onlineCPUsFile)
	if err != nil {
		t.Skipf("no %s here: %v", onlineCPUsFile, err)
	}
	online, _ := countCPUList(string(b))
	if online < 2 {
		t.Skipf("%d CPU online: pinning cannot show the difference", online)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	one.Set(0)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestNodeCPUsCountsOnlineCPUsNotTheCpuset$")
	cmd.Env = append(os.Environ(), "KIP_PRINT_NODE_CPUS=1")
	out, err := cmd.Output()
	_ = unix.SchedSetaffinity(0, &old)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("cpus=%d\n", online); !strings.HasPrefix(string(out), want) {
		t.Errorf("pinned to one CPU, NodeCPUs said %q; want %q, the node's online CPUs", out, want)
	}
}
