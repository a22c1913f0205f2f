package ipvs

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
)

// procTablePath lists this network namespace's IPVS table as text.
const procTablePath = "/proc/net/ip_vs"

// readProcTable returns every IPv4 virtual server's real servers, with
// weights and connection counters, from /proc/net/ip_vs: one read, where
// netlink needs a request per virtual server (~0.65 s per 1k in the
// emulated test VM). Virtual servers without real servers map to an empty
// list.
func readProcTable() (map[Key][]RealServer, error) {
	f, err := os.Open(procTablePath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseProcTable(f)
}

// ParseProcTable parses the format of /proc/net/ip_vs. IPv6 and
// firewall-mark virtual servers are skipped.
func ParseProcTable(r io.Reader) (map[Key][]RealServer, error) {
	t := map[Key][]RealServer{}
	var cur *Key
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 2 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP"):
			cur = nil
			ap, err := parseHexAddrPort(f[1])
			if err != nil {
				continue // IPv6
			}
			k := Key{Address: ap.Addr(), Protocol: Protocol(f[0]), Port: ap.Port()}
			t[k] = []RealServer{}
			cur = &k
		case len(f) >= 1 && f[0] != "->":
			cur = nil // FWM or a header line
		case len(f) >= 6 && cur != nil:
			ap, err := parseHexAddrPort(f[1])
			if err != nil {
				continue
			}
			var n [3]int
			for i, s := range f[3:6] {
				if n[i], err = strconv.Atoi(s); err != nil {
					return nil, fmt.Errorf("%s: bad number %q", procTablePath, s)
				}
			}
			t[*cur] = append(t[*cur], RealServer{Address: ap.Addr(), Port: ap.Port(),
				Weight: n[0], ActiveConns: n[1], InactiveConns: n[2]})
		}
	}
	return t, sc.Err()
}

// parseHexAddrPort reads an IPv4 "0A600001:01BB".
func parseHexAddrPort(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok || len(a) != 8 {
		return netip.AddrPort{}, fmt.Errorf("not an IPv4 address:port: %q", s)
	}
	b, err := hex.DecodeString(a)
	if err != nil {
		return netip.AddrPort{}, err
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b)), uint16(port)), nil
}
