package ipvs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Sysctls returns the settings a NAT-mode service proxy needs, as upstream
// kube-proxy sets them: connection tracking for IPVS packets (so iptables
// masquerading sees them), quick expiry of connections to removed real
// servers, and forwarding. conn_reuse_mode=0 avoids 1 s delays on kernels
// before 5.9 only; later kernels fixed that and need the default. With
// strictARP (--ipvs-strict-arp) the node answers ARP only for addresses of
// the asking link and announces only those, so the VIPs bound to kube-ipvs0
// are never claimed on the node's network (MetalLB's L2 mode needs this).
func Sysctls(strictARP bool) map[string]string {
	s := map[string]string{
		"net/ipv4/vs/conntrack":                 "1",
		"net/ipv4/vs/expire_nodest_conn":        "1",
		"net/ipv4/vs/expire_quiescent_template": "1",
		"net/ipv4/ip_forward":                   "1",
	}
	if strictARP {
		s["net/ipv4/conf/all/arp_ignore"] = "1"
		s["net/ipv4/conf/all/arp_announce"] = "2"
	}
	if kernelBefore(5, 9) {
		s["net/ipv4/vs/conn_reuse_mode"] = "0"
	}
	return s
}

// ApplySysctls writes each setting that differs, returning the first error.
func ApplySysctls(settings map[string]string) error {
	for key, want := range settings {
		path := filepath.Join("/proc/sys", key)
		cur, err := os.ReadFile(path)
		if err == nil && strings.TrimSpace(string(cur)) == want {
			continue
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			return fmt.Errorf("set sysctl %s=%s: %w", strings.ReplaceAll(key, "/", "."), want, err)
		}
	}
	return nil
}

func kernelBefore(major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	parts := strings.SplitN(unix.ByteSliceToString(u.Release[:]), ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, _ := strconv.Atoi(parts[0])
	mi, _ := strconv.Atoi(strings.TrimRightFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' }))
	return ma < major || ma == major && mi < minor
}
