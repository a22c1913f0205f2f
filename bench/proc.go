package main

import (
	"net/netip"
	"os"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// ipvsTable is every IPv4 virtual server with its real servers' weights.
type ipvsTable map[ipvs.Key]map[netip.AddrPort]int

// readIPVSTable reads /proc/net/ip_vs, the whole table in one read.
func readIPVSTable() (ipvsTable, error) {
	f, err := os.Open("/proc/net/ip_vs")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	all, err := ipvs.ParseProcTable(f)
	if err != nil {
		return nil, err
	}
	t := make(ipvsTable, len(all))
	for k, reals := range all {
		m := make(map[netip.AddrPort]int, len(reals))
		for _, r := range reals {
			m[r.ID()] = r.Weight
		}
		t[k] = m
	}
	return t, nil
}
