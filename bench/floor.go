package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// floorColdStart writes the same kernel state the proxiers program for n
// Services of the mix (VIPs, ipset entries, virtual and real servers,
// default/kubernetes first) with one plain netlink call per object and no
// diffing: the least work any proxier must do, one netlink message per
// system call. It returns when default/kubernetes was done and when
// everything was, and how much of it the VIP addresses took.
func floorColdStart(k kernel, n, perService int, mix string) (kubeReady, complete, addresses time.Duration, err error) {
	start := time.Now()
	if err := k.links.EnsureLink(); err != nil {
		return 0, 0, 0, err
	}
	for name, t := range benchSets {
		if err := k.sets.EnsureSet(ipset.Set{Name: name, Type: t, Family: setFamily(name), MaxElem: ipset.DefaultMaxElem}); err != nil {
			return 0, 0, 0, err
		}
	}
	kube := kernelObjects{virtualServers: []ipvs.Key{kubeKey}, addresses: []netip.Addr{kubeVIP},
		entries: []benchEntry{{"KUBE-CLUSTER-IP", ipset.Entry{IP: kubeVIP, Protocol: ipset.EntryTCP, Port: 443}}, {"KUBE-IPVS-IPS", ipset.Entry{IP: kubeVIP}}}}
	took, err := floorWrite(k, kube, func(ipvs.Key) []netip.AddrPort { return []netip.AddrPort{kubeReal} })
	addresses += took
	if err != nil {
		return 0, 0, 0, err
	}
	kubeReady = time.Since(start)
	reals, reals6 := make([]netip.AddrPort, perService), make([]netip.AddrPort, perService)
	realsOf := func(key ipvs.Key) []netip.AddrPort {
		if key.Address.Is6() {
			return reals6
		}
		return reals
	}
	nodeAddrs := nodeAddrsOf(mix)
	for i := 0; i < n; i++ {
		for j := range reals {
			reals[j] = netip.AddrPortFrom(endpointIP(i, j, perService), 8080)
			reals6[j] = netip.AddrPortFrom(endpointIPv6(i, j, perService), 8080)
		}
		took, err := floorWrite(k, objectsOf(i, mix, nodeAddrs), realsOf)
		addresses += took
		if err != nil {
			return 0, 0, 0, err
		}
	}
	return kubeReady, time.Since(start), addresses, nil
}

// floorWrite writes one Service's kernel objects with one netlink message
// per system call, each virtual server with realsOf its real servers, and
// returns how long the addresses took.
func floorWrite(k kernel, o kernelObjects, realsOf func(ipvs.Key) []netip.AddrPort) (addresses time.Duration, err error) {
	t := time.Now()
	for _, a := range o.addresses {
		if err := k.links.AddAddresses([]netip.Addr{a})[0]; err != nil {
			return time.Since(t), err
		}
	}
	addresses = time.Since(t)
	for _, e := range o.entries {
		if err := k.sets.AddEntries(e.set, []ipset.Entry{e.entry})[0]; err != nil {
			return addresses, fmt.Errorf("%s %s: %w", e.set, e.entry, err)
		}
	}
	for _, key := range o.virtualServers {
		vs := ipvs.VirtualServer{Key: key, Scheduler: "rr"}
		if err := k.ipvs.Write([]ipvs.Op{{Kind: ipvs.AddVS, VS: vs}})[0]; err != nil {
			return addresses, err
		}
		for _, r := range realsOf(key) {
			rs := ipvs.RealServer{Address: r.Addr(), Port: r.Port(), Weight: 1}
			if err := k.ipvs.Write([]ipvs.Op{{Kind: ipvs.AddRS, VS: vs, RS: rs}})[0]; err != nil {
				return addresses, err
			}
		}
	}
	return addresses, nil
}

// serviceRange holds every ClusterIP the bench allocates.
var serviceRange = netip.MustParsePrefix("10.96.0.0/12")

// floorLocalRoute times the alternative to one address per VIP: a single
// local route for the whole Service range on kube-ipvs0, which also makes
// every VIP local to the node. The route is removed again; the proxiers keep
// upstream's addresses (see docs/performance.md).
func floorLocalRoute(k kernel) (time.Duration, error) {
	link, err := netlink.LinkByName(dummyiface.DefaultLinkName)
	if err != nil {
		return 0, err
	}
	route := &netlink.Route{
		LinkIndex: link.Attrs().Index,
		Dst:       &net.IPNet{IP: serviceRange.Addr().AsSlice(), Mask: net.CIDRMask(serviceRange.Bits(), 32)},
		Type:      unix.RTN_LOCAL,
		Table:     unix.RT_TABLE_LOCAL,
		Scope:     netlink.SCOPE_HOST,
	}
	start := time.Now()
	if err := netlink.RouteAdd(route); err != nil {
		return 0, fmt.Errorf("add local route %s: %w", serviceRange, err)
	}
	took := time.Since(start)
	return took, netlink.RouteDel(route)
}

// floorOneChange is the least work a proxier does for one endpoint change:
// the API write, its watch event, and one netlink call. Samples alternate
// between adding an endpoint and removing it again.
func floorOneChange(env *framework.Env, k kernel, n, perService, samples int) (fromSent, fromWritten []time.Duration, err error) {
	err = floorSamples(env, k, n, perService, extraBase, func(s int) bool { return s < samples },
		func(_ time.Time, sent, written time.Duration) {
			fromSent, fromWritten = append(fromSent, sent), append(fromWritten, written)
		})
	return fromSent, fromWritten, err
}

// floorSamples makes floor one-change samples while more(sample) says so,
// their added endpoints from base on, and gives each to got: when it was
// sent, and its time from the write sent and from its answer.
func floorSamples(env *framework.Env, k kernel, n, perService int, base netip.Addr, more func(int) bool,
	got func(sent time.Time, fromSent, fromWritten time.Duration)) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The watch starts from the list's resourceVersion, so that it does
	// not replay every slice first: at 50k the replay outlasted the first
	// sample's wait in a slow VM.
	list, err := env.Admin.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return err
	}
	w, err := env.Admin.DiscoveryV1().EndpointSlices(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()
	seen := func(name, rv string) error {
		timeout := time.After(time.Minute)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return fmt.Errorf("endpointslice watch closed")
				}
				if sl, isSlice := ev.Object.(*discovery.EndpointSlice); isSlice && sl.Name == name && sl.ResourceVersion == rv {
					return nil
				}
			case <-timeout:
				return fmt.Errorf("no watch event for %s@%s", name, rv)
			}
		}
	}
	for s := 0; more(s); s++ {
		i := (s / 2 * 7919) % n
		key := ipvs.Key{Address: serviceIP(i), Protocol: ipvs.TCP, Port: 80}
		added := ipvs.RealServer{Address: offset(base, s/2), Port: 8080, Weight: 1}
		sl := benchSlice(i, perService)
		if s%2 == 0 {
			sl = benchSlice(i, perService, added.Address)
		}
		start := time.Now()
		wctx, wcancel := framework.Ctx()
		cur, err := env.Admin.DiscoveryV1().EndpointSlices(namespace).Update(wctx, triggered(sl), metav1.UpdateOptions{})
		wcancel()
		if err != nil {
			return err
		}
		written := time.Now()
		if err := seen(cur.Name, cur.ResourceVersion); err != nil {
			return err
		}
		op := ipvs.Op{Kind: ipvs.AddRS, VS: ipvs.VirtualServer{Key: key}, RS: added}
		if s%2 == 1 {
			op.Kind = ipvs.DeleteRS
		}
		err = k.ipvs.Write([]ipvs.Op{op})[0]
		if err != nil {
			return err
		}
		got(start, time.Since(start), time.Since(written))
		time.Sleep(200 * time.Millisecond) // no rate limit to wait out
	}
	return nil
}

// extraBase is where the endpoints added by the one-change scenario live.
var extraBase = netip.MustParseAddr("10.200.0.0")
