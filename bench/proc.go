package main

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// ipvsTable is every IPv4 virtual server with its real servers' weights.
type ipvsTable map[ipvs.Key]map[netip.AddrPort]int

// readIPVSTable parses /proc/net/ip_vs, which lists the whole table in one
// read where netlink needs a request per virtual server.
func readIPVSTable() (ipvsTable, error) {
	f, err := os.Open("/proc/net/ip_vs")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseIPVSTable(bufio.NewScanner(f))
}

func parseIPVSTable(sc *bufio.Scanner) (ipvsTable, error) {
	t := ipvsTable{}
	var cur map[netip.AddrPort]int
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 2 && (f[0] == "TCP" || f[0] == "UDP" || f[0] == "SCTP"):
			ap, err := parseHexAddrPort(f[1])
			if err != nil {
				cur = nil // IPv6 or firewall-mark services: not ours to compare
				continue
			}
			k := ipvs.Key{Address: ap.Addr(), Protocol: ipvs.Protocol(f[0]), Port: ap.Port()}
			cur = map[netip.AddrPort]int{}
			t[k] = cur
		case len(f) >= 4 && f[0] == "->" && cur != nil:
			ap, err := parseHexAddrPort(f[1])
			if err != nil {
				continue // the header line
			}
			w, err := strconv.Atoi(f[3])
			if err != nil {
				return nil, fmt.Errorf("ip_vs: weight %q", f[3])
			}
			cur[ap] = w
		}
	}
	return t, sc.Err()
}

// parseHexAddrPort reads /proc's "0A600001:01BB".
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
