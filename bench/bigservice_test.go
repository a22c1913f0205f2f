package main

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

func TestBigServiceIs90300VirtualServers(t *testing.T) {
	b := bigDefault
	svc, sl := b.service(), b.slice()
	// What the Service asks for: a virtual server per address and port.
	want := map[ipvs.Key]bool{}
	addrs := append([]string{svc.Spec.ClusterIP}, svc.Spec.ExternalIPs...)
	for _, a := range addrs {
		for _, p := range svc.Spec.Ports {
			want[ipvs.Key{Address: netip.MustParseAddr(a), Protocol: ipvs.TCP, Port: uint16(p.Port)}] = true
		}
	}
	o := b.objects()
	if len(want) != 90300 || len(o.virtualServers) != 90300 {
		t.Fatalf("the Service wants %d virtual servers, the check looks for %d; want 90,300", len(want), len(o.virtualServers))
	}
	for _, k := range o.virtualServers {
		if !want[k] {
			t.Fatalf("%s is not one of the Service's", k)
		}
	}
	if len(o.addresses) != 301 {
		t.Errorf("%d addresses, want 301", len(o.addresses))
	}
	sets := map[string]int{}
	for _, e := range o.entries {
		sets[e.set]++
	}
	if sets["KUBE-CLUSTER-IP"] != 300 || sets["KUBE-EXTERNAL-IP"] != 90000 || sets["KUBE-IPVS-IPS"] != 301 {
		t.Errorf("entries per set: %v", sets)
	}
	// Every Service port has its slice port, by name (the proxier joins them so).
	names := map[string]bool{}
	for _, p := range sl.Ports {
		names[*p.Name] = true
	}
	for _, p := range svc.Spec.Ports {
		if !names[p.Name] || p.TargetPort.IntValue() != int(p.Port) {
			t.Fatalf("port %s: no slice port of its name, or targets another number", p.Name)
		}
	}
	key := o.virtualServers[5]
	if got := b.reals(key); len(got) != 2 || got[0].Port() != key.Port {
		t.Errorf("real servers %v of %s", got, key)
	}
	// A rolling update's step keeps one endpoint and replaces the other.
	before, after := b.reals(key), b.moved().reals(key)
	if before[1] != after[0] || before[0] == after[1] || after[1] == before[1] {
		t.Errorf("moved: %v → %v, want one endpoint kept and one new", before, after)
	}
}

func TestBigServiceAddressesAreNobodyElses(t *testing.T) {
	serviceCIDR := netip.MustParsePrefix("10.96.0.0/16")
	if !serviceCIDR.Contains(bigClusterIP) {
		t.Errorf("%s is outside the apiserver's Service range", bigClusterIP)
	}
	if last := serviceIP(50000 - 1); !last.Less(bigClusterIP) || !bigClusterIP.Less(extraServiceBase) {
		t.Errorf("%s is not between the 50k Services (up to %s) and the one-change ones (%s)", bigClusterIP, last, extraServiceBase)
	}
	taken := []netip.Prefix{
		netip.MustParsePrefix("10.250.0.0/16"), netip.MustParsePrefix("10.251.0.0/16"), // the mix's external and ingress IPs
		netip.MustParsePrefix("10.200.0.0/16"), netip.MustParsePrefix("10.210.0.0/16"), // one-change's and churn's endpoints
		netip.MustParsePrefix("10.128.0.0/13"), // the Services' endpoints, 50k × 10
		netip.MustParsePrefix("10.0.0.0/16"),   // the node's addresses
	}
	for _, a := range append(bigDefault.addresses()[1:], offset(bigEndpointBase, 0), offset(bigEndpointBase, 1), bigOtherBase) {
		for _, p := range taken {
			if p.Contains(a) {
				t.Errorf("%s is in %s, which another scenario or the node uses", a, p)
			}
		}
	}
}

func TestOtherLanesNeverShareAService(t *testing.T) {
	for _, n := range []int{2, 999, 1000, 10000} {
		for step := 0; step < 3000; step++ {
			for lane := 0; lane < otherLanes; lane++ {
				svc := otherService(lane, step, n)
				if svc < 0 || svc >= n || svc%2 != lane {
					t.Fatalf("n=%d lane %d step %d: Service %d", n, lane, step, svc)
				}
			}
		}
	}
}

func TestSyncsDuringTakesTheLongestOnTheSyncGoroutine(t *testing.T) {
	log := strings.Join([]string{
		// zap's production JSON, as builds before the klog formats wrote it.
		`{"level":"debug","ts":"2026-11-26T06:16:00.100Z","caller":"proxier/proxier.go:370","msg":"synced","full":false,"services":1,"kernelOps":3,"failedObjects":0,"took":0.012,"lockWait":0.001}`,
		// component-base's JSON, as --logging-format=json writes it now.
		`{"ts":1795673790000,"caller":"proxier/proxier.go:370","msg":"synced","v":4,"full":false,"services":1,"kernelOps":451501,"failedObjects":0,"took":"25.5s","lockWait":"0s"}`,
		`{"ts":1795673791000,"caller":"app/run.go:1","msg":"something else","v":0,"took":"99s"}`,
		// A drift check: 40 s in all, 38 of them read and adopted beside other syncs.
		`{"ts":1795673830000,"caller":"proxier/proxier.go:370","msg":"synced","v":4,"full":true,"services":0,"kernelOps":0,"failedObjects":0,"took":"40s","lockWait":"0s","setup":"500ms","read":"30s","adopt":"7.5s"}`,
		`{"ts":1795673880000,"caller":"proxier/proxier.go:370","msg":"synced","v":4,"full":false,"services":1,"kernelOps":3,"took":"45s"}`,
	}, "\n")
	lines := parseSyncs(strings.NewReader(log))
	if len(lines) != 4 {
		t.Fatalf("%d sync lines, want 4", len(lines))
	}
	at := func(s string) time.Time { v, _ := time.Parse(time.RFC3339Nano, s); return v }
	st := syncsDuring(lines, at("2026-11-26T06:16:01Z"), at("2026-11-26T06:17:12Z"))
	if st.count != 2 || st.longest != 25500*time.Millisecond || st.longestOps != 451501 {
		t.Errorf("got %d syncs, longest %s with %d writes; want 2, 25.5s, 451501", st.count, st.longest, st.longestOps)
	}
	if st.longestFull != 40*time.Second {
		t.Errorf("longest drift check %s, want 40s", st.longestFull)
	}
	// The last sync began (at 06:17:15) before the window's end: it counts.
	if st := syncsDuring(lines, at("2026-11-26T06:17:20Z"), at("2026-11-26T06:17:30Z")); st.count != 1 || st.longest != 45*time.Second {
		t.Errorf("a sync under way: %+v", st)
	}
	if !withinOneSync(26*time.Second, 25500*time.Millisecond) || withinOneSync(27*time.Second, 25500*time.Millisecond) {
		t.Error("withinOneSync's margin is not 1 s")
	}
}
