//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// TestLocalRouteVIPs: with --ipvs-vip-mode=local-route each Service CIDR
// (the test cluster's 10.96.0.0/16 and fd00:10:96::/112, read from its
// ServiceCIDR) is one local route (through lo, proto 176) and no cluster
// IP of either family is bound, not even
// the kubernetes Service's, which is bound before the first sync routes the
// CIDR: unbinding it, the last address of kube-ipvs0, must not take the
// route with it (the kernel flushes a link's routes then); a pod and the
// node reach a Service through its cluster IP; a new connection to an
// unallocated address of the CIDR, or to a port no Service has, is refused,
// and a listener of the node is not reachable through the CIDR. Back in
// the default mode, the route goes once the cluster IPs are bound again.
func TestLocalRouteVIPs(t *testing.T) {
	stopShared(t)
	if err := framework.CleanKernel(); err != nil {
		t.Fatal(err)
	}
	const ns = "localroute"
	mustNamespace(t, ns)
	a := dualStackPod(t, "localroute-a", "10.244.77.1", "fd00:10:244:77::1", true)
	client := dualStackPod(t, "localroute-client", "10.244.77.100", "fd00:10:244:77::100", false)
	tcp := v1.ProtocolTCP
	web6 := framework.ClusterIPService(ns, "web6", "fd00:10:96::7710", framework.Port("http", tcp, 80, 8080))
	web6.Spec.IPFamilies = []v1.IPFamily{v1.IPv6Protocol}
	_, slice6 := slices6(ns, "web6", []discovery.EndpointPort{framework.SlicePort("http", tcp, 8080)}, a)
	mustApply(t, framework.ClusterIPService(ns, "web", "10.96.77.10", framework.Port("http", tcp, 80, 8080)),
		framework.Slice(ns, "web", "web-1", []discovery.EndpointPort{framework.SlicePort("http", tcp, 8080)},
			framework.Endpoint(a.IP.String(), "other-node", true)),
		web6, slice6)

	ours := startSynced(t, func() (*framework.Process, error) {
		return framework.StartOurs(env, "kube-ipvs-proxy-localroute", slices.Concat(ruleFlags, []string{"--ipvs-vip-mode=local-route"})...)
	})
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, cmd := range [][]string{{"ip", "route", "show", "table", "local"}, {"ip", "-6", "route", "show", "table", "local"}, {"ip", "addr", "show", "dev", "kube-ipvs0"},
			{"ipvsadm", "-Ln", "--stats"}, {"iptables-save", "-c"}, {"ip6tables-save", "-c"}, {"conntrack", "-L", "-d", "10.96.77.10"},
			{"ip", "route", "get", "10.96.77.10", "from", "10.244.77.100", "iif", "kv-localroute-client"}} {
			out, err := framework.Output(cmd...)
			t.Logf("%s: %v\n%s", strings.Join(cmd, " "), err, out)
		}
	})
	vip := ap("10.96.77.10:80")
	waitAnswerSet(t, client.HTTP, vip, "localroute-a", 3, 30*time.Second)
	if out, err := framework.Output("curl", "-sS", "-m", "3", "http://"+vip.String()+"/"); err != nil || !strings.Contains(out, "localroute-a") {
		t.Errorf("the node through the cluster IP: %q, %v", out, err)
	}
	routes, err := framework.Output("ip", "route", "show", "table", "local", "proto", "176")
	if err != nil || !strings.Contains(routes, "local 10.96.0.0/16 dev lo ") {
		t.Errorf("our local routes: %q, %v; want 10.96.0.0/16 through lo", routes, err)
	}
	if addrs, _ := framework.Output("ip", "addr", "show", "dev", "kube-ipvs0"); strings.Contains(addrs, "10.96.") || strings.Contains(addrs, "fd00:10:96:") {
		t.Errorf("cluster IPs bound in local-route mode:\n%s", addrs)
	}
	// IPv6: the same, through the IPv6 CIDR's route. The node gets a
	// global IPv6 address, as a dual-stack node has, for its own
	// connections' source (the test VM's are link-local).
	node6 := "fd00:0:77::15"
	if _, err := framework.Output("ip", "addr", "add", node6+"/128", "dev", client.HostLink(), "nodad"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = framework.Output("ip", "addr", "del", node6+"/128", "dev", client.HostLink()) })
	vip6 := ap("[fd00:10:96::7710]:80")
	waitAnswerSet(t, client.HTTP, vip6, "localroute-a", 3, 30*time.Second)
	if out, err := framework.Output("curl", "-sS", "-m", "3", "http://"+vip6.String()+"/"); err != nil || !strings.Contains(out, "localroute-a") {
		t.Errorf("the node through the IPv6 cluster IP: %q, %v", out, err)
	}
	routes6, err := framework.Output("ip", "-6", "route", "show", "table", "local", "proto", "176")
	if err != nil || !strings.Contains(routes6, "local fd00:10:96::/112 dev lo ") {
		t.Errorf("our IPv6 local routes: %q, %v; want fd00:10:96::/112 through lo", routes6, err)
	}
	for _, to := range []netip.AddrPort{ap("10.96.77.11:80"), ap("10.96.77.10:81"), ap("[fd00:10:96::7711]:80"), ap("[fd00:10:96::7710]:81")} {
		// Refused by KUBE-IPVS-FILTER, not lost: a timeout would say the
		// packets went nowhere.
		if got, err := client.HTTP(to, 3*time.Second); err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("%s answered %q (%v): want the connection refused", to, got, err)
		}
	}
	// A node listener on every address is not reached through the CIDR.
	listener := exec.Command("busybox", "nc", "-l", "-p", "9999", "-e", "echo", "node")
	if err := listener.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = listener.Process.Kill(); _ = listener.Wait() }()
	time.Sleep(500 * time.Millisecond)
	if got, err := client.HTTP(ap("10.96.77.12:9999"), 3*time.Second); err == nil || strings.Contains(got, "node") {
		t.Errorf("a node listener answered through an unallocated address of the CIDR: %q, %v", got, err)
	}

	if err := ours.Stop(); err != nil {
		t.Fatal(err)
	}
	back := startSynced(t, func() (*framework.Process, error) {
		return framework.StartOurs(env, "kube-ipvs-proxy-addresses", ruleFlags...)
	})
	waitAnswerSet(t, client.HTTP, vip, "localroute-a", 3, 30*time.Second)
	if err := framework.Eventually(10*time.Second, 200*time.Millisecond, func() error {
		for _, family := range []string{"-4", "-6"} {
			routes, err := framework.Output("ip", family, "route", "show", "table", "local", "proto", "176")
			if err != nil {
				return err
			}
			if strings.Contains(routes, "10.96.0.0/16") || strings.Contains(routes, "fd00:10:96::/112") {
				return fmt.Errorf("a route is still there:\n%s", routes)
			}
		}
		return nil
	}); err != nil {
		t.Error(err)
	}
	if addrs, _ := framework.Output("ip", "addr", "show", "dev", "kube-ipvs0"); !strings.Contains(addrs, "10.96.77.10/32") || !strings.Contains(addrs, "fd00:10:96::7710/128") {
		t.Errorf("the cluster IPs are not bound again in the default mode:\n%s", addrs)
	}
	if err := back.Stop(); err != nil {
		t.Fatal(err)
	}
}
