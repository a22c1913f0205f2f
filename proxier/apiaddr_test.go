package proxier

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	netutils "k8s.io/utils/net"
)

// legacyService is a LoadBalancer Service and its slice with every address
// written as form says: "canonical", or "legacy" with IPv4 leading zeros
// (kube-apiserver accepts them unless StrictIPCIDRValidation is on).
func legacyService(form string) (*v1.Service, *discovery.EndpointSlice) {
	ip := map[string]map[string]string{
		"canonical": {"cluster": "10.96.0.10", "external": "203.0.113.7", "ingress": "198.51.100.7",
			"range": "10.0.0.0/8", "range2": " 192.168.1.0/24 ", "endpoint": "10.244.0.1"},
		"legacy": {"cluster": "010.096.000.010", "external": "203.000.113.007", "ingress": "198.051.100.007",
			"range": "010.000.000.000/08", "range2": " 192.168.001.000/24 ", "endpoint": "010.244.000.001"},
	}[form]
	s := svc(ip["cluster"], port("http", v1.ProtocolTCP, 80))
	s.Name = "web"
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	s.Spec.ClusterIPs = []string{ip["cluster"]}
	s.Spec.ExternalIPs = []string{ip["external"]}
	s.Spec.LoadBalancerSourceRanges = []string{ip["range"], ip["range2"]}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip["ingress"]}}
	sl := slice("web-1", []discovery.EndpointPort{sport("http", v1.ProtocolTCP, 8080)}, ep{ip: ip["endpoint"], ready: yes})
	sl.Labels[discovery.LabelServiceName] = "web"
	return s, sl
}

// A Service whose addresses have IPv4 leading zeros is programmed as if
// they had none, read in decimal as upstream reads them: the same virtual
// servers, real servers, bound addresses, set entries and iptables rules.
func TestLegacyAddressesProgramLikeCanonicalOnes(t *testing.T) {
	dumps := map[string]string{}
	for _, form := range []string{"canonical", "legacy"} {
		p, k, ipt, ev := newTestProxier(t)
		s, sl := legacyService(form)
		p.OnServiceAdd(s)
		p.OnEndpointSliceAdd(sl)
		p.OnServicesSynced()
		p.OnEndpointSlicesSynced()
		p.SyncNow()
		if len(*ev) != 0 {
			t.Errorf("%s: events %q, want none", form, *ev)
		}
		saved, _ := ipt.Save()
		dumps[form] = strings.Join([]string{k.ipvs.Dump(), k.links.Dump(), k.sets.Dump(), string(saved)}, "\n---\n")
	}
	for _, want := range []string{"-A 10.96.0.10:80/TCP", "-a 10.96.0.10:80/TCP -r 10.244.0.1:8080",
		"-A 203.0.113.7:80/TCP", "-A 198.51.100.7:80/TCP", "198.51.100.7,tcp:80,10.0.0.0/8", "198.51.100.7,tcp:80,192.168.1.0/24"} {
		if !strings.Contains(dumps["canonical"], want) {
			t.Fatalf("canonical form: %q missing from\n%s", want, dumps["canonical"])
		}
	}
	if dumps["legacy"] != dumps["canonical"] {
		t.Fatalf("legacy form programs\n%s\nwant, as the canonical form,\n%s", dumps["legacy"], dumps["canonical"])
	}
}

func TestParseAPIAddrAndPrefix(t *testing.T) {
	for in, want := range map[string]string{
		"010.096.000.010":    "10.96.0.10", // decimal, not octal
		"0000010.1.2.3":      "10.1.2.3",
		"::ffff:010.1.2.3":   "10.1.2.3",
		"::ffff:10.1.2.3":    "10.1.2.3",
		"fd00::0010":         "fd00::10",
		"fe80::1%eth0":       "", // zones: upstream rejects them
		"1.2.3":              "",
		"256.0.0.1":          "",
		"0x0a.0.0.1":         "",
		"":                   "",
		" 10.0.0.1":          "",
		"10.0.0.1/32":        "",
		"0010.000.000.00001": "10.0.0.1",
	} {
		a, ok := parseAPIAddr(in)
		if got := map[bool]string{true: a.String(), false: ""}[ok]; got != want {
			t.Errorf("parseAPIAddr(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"010.000.000.000/08":  "10.0.0.0/8",
		"10.1.2.3/8":          "10.0.0.0/8",
		"010.1.2.3/32":        "10.1.2.3/32",
		"::ffff:10.0.0.0/104": "::ffff:10.0.0.0/104",
		"fd00::1/64":          "fd00::/64",
		"10.0.0.0/33":         "",
		"fe80::/64%eth0":      "",
		"10.0.0.0":            "",
		"10.0.0.0/-1":         "",
	} {
		p, ok := parseAPIPrefix(in)
		if got := map[bool]string{true: p.String(), false: ""}[ok]; got != want {
			t.Errorf("parseAPIPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzAPIAddr checks that the address parsers accept exactly what
// k8s.io/utils/net's sloppy parsers accept, the same addresses and
// prefixes, whichever of their two paths they take.
func FuzzAPIAddr(f *testing.F) {
	for _, s := range []string{"010.096.000.010", "10.0.0.1", "::ffff:1.2.3.4", "fe80::1%eth0", "fd00::0010",
		"010.000.000.000/08", "::ffff:010.0.0.0/104", "10.1.2.3/8", "1:2:3:4:5:6:7:8", "::", "0/0", "00001::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := parseAPIAddr(s)
		ip := netutils.ParseIPSloppy(s)
		want, wantOK := netip.AddrFromSlice(ip)
		if ok != wantOK || ok && a != want.Unmap() {
			t.Fatalf("parseAPIAddr(%q) = %v, %v; upstream reads %v", s, a, ok, ip)
		}
		if a.Is4In6() || a.Zone() != "" {
			t.Fatalf("parseAPIAddr(%q) = %v: mapped or zoned", s, a)
		}
		p, ok := parseAPIPrefix(s)
		_, n, err := netutils.ParseCIDRSloppy(s)
		if ok != (err == nil) {
			t.Fatalf("parseAPIPrefix(%q) = %v, %v; upstream: %v", s, p, ok, err)
		}
		if ok {
			ones, _ := n.Mask.Size()
			na, _ := netip.AddrFromSlice(n.IP)
			if p.Addr() != na || p.Bits() != ones || p != p.Masked() {
				t.Fatalf("parseAPIPrefix(%q) = %v; upstream reads %v", s, p, n)
			}
		}
	})
}
