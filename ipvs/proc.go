package ipvs

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
)

// procTablePath lists this network namespace's IPVS table as text.
const procTablePath = "/proc/net/ip_vs"

// ParseProcTable parses the format of /proc/net/ip_vs. Firewall-mark
// virtual servers are skipped. Virtual servers without real
// servers map to an empty list.
func ParseProcTable(r io.Reader) (map[Key][]RealServer, error) {
	t := map[Key][]RealServer{}
	var cur *Key
	// The kernel returns at most a page per read(2) and resumes each one by
	// walking the table from its start, so this read is quadratic in the
	// number of virtual servers whatever the buffer; the parse at least
	// allocates nothing per line.
	sc := bufio.NewScanner(r)
	var f [8][]byte
	for sc.Scan() {
		n := fields(sc.Bytes(), &f)
		switch {
		case n >= 2 && isProtocol(f[0]):
			cur = nil
			ap, ok := parseHexAddrPort(f[1])
			if !ok {
				continue
			}
			k := Key{Address: ap.Addr(), Protocol: Protocol(f[0]), Port: ap.Port()}
			t[k] = []RealServer{}
			cur = &k
		case n >= 1 && string(f[0]) != "->":
			cur = nil // FWM or a header line
		case n >= 6 && cur != nil:
			ap, ok := parseHexAddrPort(f[1])
			if !ok {
				continue
			}
			var v [3]int
			for i, s := range f[3:6] {
				if v[i], ok = atoi(s); !ok {
					return nil, fmt.Errorf("%s: bad number %q", procTablePath, s)
				}
			}
			t[*cur] = append(t[*cur], RealServer{Address: ap.Addr(), Port: ap.Port(),
				Weight: int32(v[0]), ActiveConns: int32(v[1]), InactiveConns: int32(v[2])})
		}
	}
	return t, sc.Err()
}

func isProtocol(b []byte) bool {
	switch string(b) {
	case "TCP", "UDP", "SCTP":
		return true
	}
	return false
}

// fields splits a line at blanks into out, without allocating; it returns
// how many fields it found (at most len(out)).
func fields(line []byte, out *[8][]byte) int {
	n := 0
	for i := 0; i < len(line) && n < len(out); {
		for i < len(line) && isBlank(line[i]) {
			i++
		}
		start := i
		for i < len(line) && !isBlank(line[i]) {
			i++
		}
		if i > start {
			out[n] = line[start:i]
			n++
		}
	}
	return n
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func atoi(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// parseHexAddrPort reads an IPv4 "0A600001:01BB" or an IPv6
// "[fd00:0010:0096:0000:0000:0000:0000:4210]:01BB".
func parseHexAddrPort(s []byte) (netip.AddrPort, bool) {
	var addr netip.Addr
	var rest []byte
	switch {
	case len(s) > 2 && s[0] == '[':
		end := bytes.Index(s, []byte("]:"))
		if end < 0 {
			return netip.AddrPort{}, false
		}
		a, err := netip.ParseAddr(string(s[1:end]))
		if err != nil || !a.Is6() {
			return netip.AddrPort{}, false
		}
		addr, rest = a, s[end+2:]
	case len(s) >= 10 && s[8] == ':':
		var a [4]byte
		if _, err := hex.Decode(a[:], s[:8]); err != nil {
			return netip.AddrPort{}, false
		}
		addr, rest = netip.AddrFrom4(a), s[9:]
	default:
		return netip.AddrPort{}, false
	}
	if len(rest) == 0 {
		return netip.AddrPort{}, false
	}
	var port uint64
	for _, c := range rest {
		d, ok := hexDigit(c)
		if !ok || port > 0xfff {
			return netip.AddrPort{}, false
		}
		port = port<<4 | uint64(d)
	}
	return netip.AddrPortFrom(addr, uint16(port)), true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
