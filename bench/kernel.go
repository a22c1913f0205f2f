package main

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// kernel reads the state a proxier has programmed, over netlink and /proc.
type kernel struct {
	ipvs  *ipvs.Netlink
	sets  *ipset.Netlink
	links *dummyiface.Netlink
}

func openKernel() (kernel, error) {
	v, err := ipvs.NewNetlink()
	if err != nil {
		return kernel{}, err
	}
	s, err := ipset.NewNetlink()
	if err != nil {
		return kernel{}, err
	}
	return kernel{ipvs: v, sets: s, links: dummyiface.NewNetlink(dummyiface.DefaultLinkName)}, nil
}

var (
	kubeVIP  = netip.MustParseAddr("10.96.0.1")
	kubeKey  = ipvs.Key{Address: kubeVIP, Protocol: ipvs.TCP, Port: 443}
	kubeReal = netip.MustParseAddrPort("10.0.2.100:6443")
)

// kubernetesReady says whether default/kubernetes alone is fully programmed:
// virtual server with its real server, VIP, ipset entries and masquerade rules.
func (k kernel) kubernetesReady() bool {
	reals, err := k.ipvs.RealServers(kubeKey)
	if err != nil || len(reals) == 0 || reals[0].ID() != kubeReal || reals[0].Weight != 1 {
		return false
	}
	if ok, err := k.sets.Has("KUBE-CLUSTER-IP", ipset.Entry{IP: kubeVIP, Protocol: ipset.EntryTCP, Port: 443}); err != nil || !ok {
		return false
	}
	if ok, err := k.sets.Has("KUBE-IPVS-IPS", ipset.Entry{IP: kubeVIP}); err != nil || !ok {
		return false
	}
	// One route lookup, where listing kube-ipvs0's addresses returns
	// thousands: the VIP is local once it is on the link (or, in our
	// --ipvs-vip-mode=local-route, once the Service range's route is in).
	routes, err := netlink.RouteGet(kubeVIP.AsSlice())
	return err == nil && len(routes) > 0 && routes[0].Type == unix.RTN_LOCAL
}

// wanted counts the kernel objects of n Services of a mix, and of
// default/kubernetes.
type wanted struct {
	virtualServers, addresses int
	clusterIPs                int // of the addresses
	entries                   map[string]int
}

func wantedObjects(n int, mix string) wanted {
	w := wanted{virtualServers: 1, addresses: 1, clusterIPs: n*clusterIPs(mix) + 1, entries: map[string]int{"KUBE-CLUSTER-IP": 1, "KUBE-IPVS-IPS": 1}}
	nodeAddrs := nodeAddrsOf(mix)
	for i := 0; i < n; i++ {
		o := objectsOf(i, mix, nodeAddrs)
		w.virtualServers += len(o.virtualServers)
		w.addresses += len(o.addresses)
		for _, e := range o.entries {
			w.entries[e.set]++
		}
	}
	return w
}

// complete says whether the kernel holds the whole desired state for n
// Services of the mix, with perService endpoints each, plus
// default/kubernetes; the string says what is missing. routed is our
// --ipvs-vip-mode=local-route: the cluster IPs are local through a route
// for the Service range, not bound to kube-ipvs0.
func (k kernel) complete(n, perService int, mix string, routed bool) (bool, string) {
	want := wantedObjects(n, mix)
	if routed {
		want.addresses -= want.clusterIPs
		vips := []netip.Addr{kubeVIP}
		if n > 0 {
			vips = append(vips, serviceIP(n-1))
			if mix == mixDual {
				vips = append(vips, serviceIPv6(n-1))
			}
		}
		for _, vip := range vips {
			if routes, err := netlink.RouteGet(vip.AsSlice()); err != nil || len(routes) == 0 || routes[0].Type != unix.RTN_LOCAL {
				return false, fmt.Sprintf("cluster IP %s not local (%v)", vip, err)
			}
		}
	}
	vss, err := k.ipvs.VirtualServers()
	if err != nil {
		return false, err.Error()
	}
	if len(vss) < want.virtualServers {
		return false, fmt.Sprintf("%d/%d virtual servers", len(vss), want.virtualServers)
	}
	// /proc/net/ip_vs lists every real server in one read, where netlink
	// needs a request per virtual server.
	table, err := os.ReadFile("/proc/net/ip_vs")
	if err != nil {
		return false, err.Error()
	}
	reals := strings.Count(string(table), "Masq")
	if wantReals := (want.virtualServers-1)*perService + 1; reals < wantReals {
		return false, fmt.Sprintf("%d/%d real servers", reals, wantReals)
	}
	addrs, err := k.links.Addresses()
	if err != nil || len(addrs) < want.addresses {
		return false, fmt.Sprintf("%d/%d addresses (%v)", len(addrs), want.addresses, err)
	}
	for set, count := range want.entries {
		have, err := k.sets.Count(set)
		if err != nil || have < count {
			return false, fmt.Sprintf("%s %d/%d entries (%v)", set, have, count, err)
		}
	}
	return true, ""
}

// hasReal says whether a real server is present with a non-zero weight.
func (k kernel) hasReal(key ipvs.Key, id netip.AddrPort) bool {
	reals, err := k.ipvs.RealServers(key)
	if err != nil {
		return false
	}
	for _, r := range reals {
		if r.ID() == id && r.Weight > 0 {
			return true
		}
	}
	return false
}

// reloadIPVS unloads and reloads the IPVS modules, so that each proxier
// starts on an IPVS table that is empty in every respect. Deleting a
// virtual server does not free its real servers: the kernel keeps them in a
// per-namespace trash list for two to three minutes, and every real server
// added meanwhile is first looked up in that list, one entry at a time. A
// cold start at 10k Services × 10 endpoints right after another proxier's
// was cleaned up took 2m38s instead of 21 s.
func reloadIPVS() error {
	data, err := os.ReadFile("/proc/modules")
	if err != nil {
		return err
	}
	// The modules that use ip_vs (its schedulers, xt_ipvs) go first and
	// come back after it.
	var users []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "ip_vs" && f[3] != "-" {
			users = strings.FieldsFunc(f[3], func(r rune) bool { return r == ',' })
		}
	}
	if out, err := exec.Command("modprobe", append(append([]string{"-r"}, users...), "ip_vs")...).CombinedOutput(); err != nil {
		return fmt.Errorf("unload ip_vs: %v: %s", err, strings.TrimSpace(string(out)))
	}
	for _, m := range append([]string{"ip_vs"}, users...) {
		if out, err := exec.Command("modprobe", m).CombinedOutput(); err != nil {
			return fmt.Errorf("load %s: %v: %s", m, err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}
