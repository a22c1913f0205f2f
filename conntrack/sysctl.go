package conntrack

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Settings are the connection-tracking table's size and timeouts, as
// kube-proxy's --conntrack-* flags give them. Zero leaves a value as the
// kernel has it.
type Settings struct {
	MaxPerCore, Min                              int
	TCPEstablished, TCPCloseWait, UDP, UDPStream time.Duration
	TCPBeLiberal                                 bool
}

// maxScaled caps MaxPerCore's product, as kube-proxy v1.37 does: with the
// default 32768 per core, nodes of more than 32 CPUs.
const maxScaled = 1 << 20

// Max is the table size kube-proxy v1.37 asks for: MaxPerCore per CPU and
// at least Min; 0 (leave it) without MaxPerCore. A product above maxScaled
// is maxScaled, whatever Min says, as upstream.
func (s Settings) Max(cpus int) int {
	if s.MaxPerCore <= 0 {
		return 0
	}
	if scaled := s.MaxPerCore * cpus; scaled > maxScaled {
		return maxScaled
	}
	return max(s.MaxPerCore*cpus, s.Min)
}

// Sysctls are the /proc/sys timeouts (relative paths) for s, as upstream
// sets them; the table's size is RaiseMax's.
func (s Settings) Sysctls() map[string]string {
	out := map[string]string{}
	seconds := func(key string, d time.Duration) {
		if d > 0 {
			out["net/netfilter/"+key] = strconv.Itoa(int(d.Seconds()))
		}
	}
	seconds("nf_conntrack_tcp_timeout_established", s.TCPEstablished)
	seconds("nf_conntrack_tcp_timeout_close_wait", s.TCPCloseWait)
	seconds("nf_conntrack_udp_timeout", s.UDP)
	seconds("nf_conntrack_udp_timeout_stream", s.UDPStream)
	if s.TCPBeLiberal {
		out["net/netfilter/nf_conntrack_tcp_be_liberal"] = "1"
	}
	return out
}

// hashSizePath is the conntrack module's hash table size parameter.
const hashSizePath = "/sys/module/nf_conntrack/parameters/hashsize"

// GrowHashTable makes the table's hash a quarter of its size, as upstream
// does, when it is smaller: a table of max entries in too few buckets makes
// long chains. A read-only /sys (a container without it mounted writable)
// is an error that says so.
func GrowHashTable(maxEntries int) error {
	want := maxEntries / 4
	if want <= 0 {
		return nil
	}
	cur, err := os.ReadFile(hashSizePath)
	if err != nil {
		return fmt.Errorf("read conntrack hash size: %w", err)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(cur))); err == nil && n >= want {
		return nil
	}
	if err := os.WriteFile(hashSizePath, []byte(strconv.Itoa(want)), 0o644); err != nil {
		return fmt.Errorf("set conntrack hash size %d (is /sys mounted read-only?): %w", want, err)
	}
	return nil
}

// maxPath is the conntrack table's size.
const maxPath = "/proc/sys/net/netfilter/nf_conntrack_max"

// RaiseMax makes the conntrack table hold at least want entries, never
// fewer than it does: kube-proxy v1.37 only raises it, so that a node
// sized up by its operator keeps that.
func RaiseMax(want int) error { return raise(maxPath, want) }

func raise(path string, want int) error {
	if want <= 0 {
		return nil
	}
	if cur, err := os.ReadFile(path); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(cur))); err == nil && n >= want {
			return nil
		}
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(want)), 0o644); err != nil {
		return fmt.Errorf("set sysctl net.netfilter.nf_conntrack_max=%d: %w", want, err)
	}
	return nil
}

// onlineCPUsFile lists the node's online CPUs ("0-3,6"), whatever cpuset
// the proxier's own container is pinned to.
const onlineCPUsFile = "/sys/devices/system/cpu/online"

// NodeCPUs counts the node's online CPUs, which size the node-wide
// conntrack table as v1.37 sizes it: runtime.NumCPU counts only the CPUs
// the process may run on, too few under kubelet's static CPU policy. If
// the file cannot be read, runtime.NumCPU.
func NodeCPUs() int {
	b, err := os.ReadFile(onlineCPUsFile)
	if n, ok := countCPUList(string(b)); err == nil && ok {
		return n
	}
	return runtime.NumCPU()
}

// countCPUList counts the CPUs of a kernel CPU list such as "0-3,6\n".
func countCPUList(list string) (int, bool) {
	n := 0
	for _, part := range strings.Split(strings.TrimSpace(list), ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || b < a {
			return 0, false
		}
		n += b - a + 1
	}
	return n, n > 0
}
