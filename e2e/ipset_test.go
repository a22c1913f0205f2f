//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
)

// TestIPSetCountsFromTheHeader checks that a set's entry count, read from
// its header alone, follows adds and deletes, as ipset's own listing does,
// for the set types the proxier uses.
func TestIPSetCountsFromTheHeader(t *testing.T) {
	t.Parallel()
	const ns = "kip-ipset-count"
	var h *ipset.Netlink
	var err error
	inNetns(t, ns, func() { h, err = ipset.NewNetlink() })
	if err != nil {
		t.Fatal(err)
	}
	sets := []ipset.Set{
		{Name: "KIP-TEST-IPPORT", Type: ipset.HashIPPort, Family: "inet", MaxElem: 1024},
		{Name: "KIP-TEST-IPS", Type: ipset.HashIP, Family: "inet", MaxElem: 1024},
		{Name: "KIP-TEST-PORTS", Type: ipset.BitmapPort, Family: "inet"},
	}
	for _, s := range sets {
		if err := h.EnsureSet(s); err != nil {
			t.Fatal(err)
		}
	}
	count := func(set string, want int) {
		t.Helper()
		if got, err := h.Count(set); err != nil || got != want {
			t.Errorf("Count(%s) = %d, %v; want %d", set, got, err, want)
		}
		saved, err := framework.Output("ip", "netns", "exec", ns, "ipset", "list", "-t", set)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(saved, fmt.Sprintf("Number of entries: %d\n", want)) {
			t.Errorf("ipset list -t %s disagrees with %d:\n%s", set, want, saved)
		}
	}
	count("KIP-TEST-IPPORT", 0)
	entries := []ipset.Entry{
		{IP: mustAddr("10.96.0.1"), Protocol: "tcp", Port: 443},
		{IP: mustAddr("10.96.0.10"), Protocol: "udp", Port: 53},
		{IP: mustAddr("10.96.0.10"), Protocol: "tcp", Port: 53},
	}
	for _, err := range h.AddEntries("KIP-TEST-IPPORT", entries) {
		if err != nil {
			t.Fatal(err)
		}
	}
	count("KIP-TEST-IPPORT", 3)
	for _, err := range h.DeleteEntries("KIP-TEST-IPPORT", entries[:1]) {
		if err != nil {
			t.Fatal(err)
		}
	}
	count("KIP-TEST-IPPORT", 2)
	for _, err := range h.AddEntries("KIP-TEST-IPS", []ipset.Entry{{IP: mustAddr("10.96.0.1")}, {IP: mustAddr("10.96.0.10")}}) {
		if err != nil {
			t.Fatal(err)
		}
	}
	count("KIP-TEST-IPS", 2)
	// bitmap:port takes port-only entries (the NodePort sets).
	ports := []ipset.Entry{{Port: 30080}, {Port: 30443}}
	for _, err := range h.AddEntries("KIP-TEST-PORTS", ports) {
		if err != nil {
			t.Fatal(err)
		}
	}
	count("KIP-TEST-PORTS", 2)
	if got, err := h.Entries("KIP-TEST-PORTS"); err != nil || len(got) != 2 || !slices.Contains(got, ports[0]) || !slices.Contains(got, ports[1]) {
		t.Errorf("Entries(KIP-TEST-PORTS) = %v, %v; want %v", got, err, ports)
	}
	for _, err := range h.DeleteEntries("KIP-TEST-PORTS", ports[:1]) {
		if err != nil {
			t.Fatal(err)
		}
	}
	count("KIP-TEST-PORTS", 1)
	if _, err := h.Count("KIP-TEST-MISSING"); err == nil {
		t.Error("Count of a missing set gave no error")
	}
}
