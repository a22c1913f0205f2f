package glue

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// FuzzSavedBlocked feeds the KUBE-IPVS-OUT-FILTER reader any
// iptables-save output, and a chain of rules built from any VIP:ports as
// iptables-save prints them. Any output: no panic, and what it reads is
// sorted, once each, of a known protocol. The built chain: it reads back
// as those VIP:ports, clean, so a restart plans no edit.
func FuzzSavedBlocked(f *testing.F) {
	f.Add([]byte("*filter\n:KUBE-IPVS-OUT-FILTER - [0:0]\n-A KUBE-IPVS-OUT-FILTER -s 10.0.0.1/32 -m ipvs --vproto 6 --vaddr 10.0.0.1 --vport 80 -j DROP\nCOMMIT\n"),
		[]byte{10, 0, 0, 1, 6, 0, 80, 253, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 17, 0, 53})
	f.Add([]byte("*filter\n-A KUBE-IPVS-OUT-FILTER -s fd00::1 -m ipvs --vaddr fd00::1/128 --vproto sctp --vport 65535 -j DROP -j DROP\n"), []byte{})
	f.Fuzz(func(t *testing.T, saved, vips []byte) {
		have, _ := savedBlocked(saved)
		if !slices.IsSortedFunc(have, CompareEntries) || len(slices.CompactFunc(slices.Clone(have), func(a, b objects.Entry) bool { return a == b })) != len(have) {
			t.Fatalf("read %v: not sorted, or not once each", have)
		}
		for _, e := range have {
			if !e.IP.IsValid() || e.Protocol != objects.EntryTCP && e.Protocol != objects.EntryUDP && e.Protocol != objects.EntrySCTP {
				t.Fatalf("read an entry we never write: %+v", e)
			}
		}

		want := blockedOf(vips)
		lines := []string{"*filter", ":" + blockedChain + " - [0:0]"}
		for _, e := range want {
			lines = append(lines, "-A "+blockedChain+" "+savedForm(blockedRule(e)))
		}
		got, clean := savedBlocked([]byte(strings.Join(append(lines, "COMMIT", ""), "\n")))
		if !clean || !slices.Equal(got, want) {
			t.Fatalf("saved chain of %v reads as %v (clean %v)", want, got, clean)
		}
		if p := planBlocked(got, clean, want); !p.none() {
			t.Fatalf("a chain already right is edited: %+v", p)
		}
	})
}

// blockedOf decodes VIP:ports from b: a family byte (even: IPv4), the
// address, a protocol byte and a two-byte port each. They come back sorted
// and once each, as the glue keeps them.
func blockedOf(b []byte) []objects.Entry {
	var out []objects.Entry
	for len(b) > 0 {
		n := 4
		if b[0]%2 == 1 {
			n = 16
		}
		if len(b) < 1+n+3 {
			break
		}
		a, _ := netip.AddrFromSlice(b[1 : 1+n])
		out = append(out, objects.Entry{IP: a.Unmap(), Protocol: []objects.EntryProtocol{objects.EntryTCP, objects.EntryUDP, objects.EntrySCTP}[int(b[1+n])%3],
			Port: uint16(b[2+n])<<8 | uint16(b[3+n])})
		b = b[1+n+3:]
	}
	slices.SortFunc(out, CompareEntries)
	return slices.Compact(out)
}

// FuzzOurChains feeds the glue's comparison any iptables-save output and
// any restore payload. What it keeps are lines of the saved output, each
// of a chain the payload declares in that table (never
// KUBE-IPVS-OUT-FILTER, which is compared on its own); and chains the
// payload does not declare, however many, change nothing.
func FuzzOurChains(f *testing.F) {
	f.Add([]byte("*nat\n:KUBE-SERVICES - [0:0]\n:OTHER - [0:0]\n-A KUBE-SERVICES -j ACCEPT\n-A OTHER -j DROP\nCOMMIT\n"),
		[]byte("*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j ACCEPT\nCOMMIT\n*filter\n:KUBE-IPVS-OUT-FILTER - [0:0]\nCOMMIT\n"))
	f.Add([]byte("*filter\n:A ACCEPT [1:2]\n-A A\n-A\n:\n*\n"), []byte("*filter\n:A\n"))
	f.Fuzz(func(t *testing.T, saved, payload []byte) {
		out := ourChains(saved, payload)
		declared := map[[2]string]bool{} // table, chain
		table := ""
		for _, l := range strings.Split(string(payload), "\n") {
			if tb, ok := strings.CutPrefix(l, "*"); ok {
				table = tb
			} else if rest, ok := strings.CutPrefix(l, ":"); ok {
				chain, _, _ := strings.Cut(rest, " ")
				declared[[2]string{table, chain}] = true
			}
		}
		foreign := "ZZ-FOREIGN"
		for strings.Contains(string(payload), foreign) || strings.Contains(string(saved), foreign) {
			foreign += "-X"
		}
		var more []string
		for _, l := range strings.Split(string(saved), "\n") {
			more = append(more, l, ":"+foreign+" ACCEPT [0:0]", "-A "+foreign+" -j DROP")
		}
		if again := ourChains([]byte(strings.Join(more, "\n")), payload); again != out {
			t.Fatalf("foreign chains changed the comparison:\n%q\n%q", out, again)
		}
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if out == "" {
				break
			}
			matched := false
			for key := range declared {
				tb, chain := key[0], key[1]
				if chain != blockedChain && chain != "" &&
					(l == tb+" :"+chain || l == tb+" -A "+chain || strings.HasPrefix(l, tb+" -A "+chain+" ")) {
					matched = true
				}
			}
			if !matched {
				t.Fatalf("kept %q, of no chain of ours the payload declares (%v)", l, declared)
			}
		}
	})
}
