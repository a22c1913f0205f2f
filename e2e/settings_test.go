//go:build e2e

package e2e

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestKernelSettings: --ipvs-strict-arp sets arp_ignore and arp_announce,
// so that a host on one of the node's links that ARPs for a Service VIP
// itself gets no answer, while one routed through its gateway is served;
// the --ipvs-*-timeout flags set IPVS's timeouts; the conntrack table is
// sized and timed as upstream's defaults ask.
func TestKernelSettings(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	// Conntrack as upstream's defaults ask: 32768 per CPU, at least 131072,
	// established TCP 24 h, CLOSE_WAIT 1 h, and a hash of a quarter of that.
	conntrackMax := max(32768*runtime.NumCPU(), 131072)
	for key, want := range map[string]string{"net/ipv4/conf/all/arp_ignore": "1", "net/ipv4/conf/all/arp_announce": "2",
		"net/netfilter/nf_conntrack_max": strconv.Itoa(conntrackMax), "net/netfilter/nf_conntrack_tcp_timeout_established": "86400",
		"net/netfilter/nf_conntrack_tcp_timeout_close_wait": "3600"} {
		got, err := os.ReadFile("/proc/sys/" + key)
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimSpace(string(got)) != want {
			t.Errorf("%s = %s, want %s", key, strings.TrimSpace(string(got)), want)
		}
	}
	hash, err := os.ReadFile("/sys/module/nf_conntrack/parameters/hashsize")
	if n, _ := strconv.Atoi(strings.TrimSpace(string(hash))); err != nil || n < conntrackMax/4 {
		t.Errorf("conntrack hash size %q (%v), want at least %d", hash, err, conntrackMax/4)
	}
	got, err := ipvs.GetTimeouts()
	if err != nil {
		t.Fatal(err)
	}
	if want := (ipvs.Timeouts{TCP: 1000 * time.Second, TCPFin: 100 * time.Second, UDP: 200 * time.Second}); got != want {
		t.Errorf("IPVS timeouts %+v, want %+v", got, want)
	}

	const ns = "strictarp"
	mustNamespace(t, ns)
	pod := mustPod(t, "arp-web", "10.244.35.1", true)
	client := mustPod(t, "arp-client", "192.168.35.2", false)
	svc, slice := webService(ns, "10.96.35.10", pod)
	mustApply(t, svc, slice)
	vip := ap("10.96.35.10:80")
	waitAnswerSet(t, client.HTTP, vip, "arp-web", 4, 30*time.Second)

	// The VIP on the client's link: the client ARPs for it, and the node,
	// which holds it on kube-ipvs0 only, stays silent.
	if err := client.IPCommand("route", "add", vip.Addr().String()+"/32", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	if answer, err := client.HTTP(vip, 3*time.Second); err == nil {
		t.Errorf("the node answered ARP for a VIP with strict ARP: %q", answer)
	}
	if err := client.IPCommand("route", "del", vip.Addr().String()+"/32", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	waitAnswerSet(t, client.HTTP, vip, "arp-web", 2, 10*time.Second)
}
