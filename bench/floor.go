package main

import (
	"net/netip"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// floorColdStart writes the same kernel state the proxiers program for n
// Services (VIPs, ipset entries, virtual and real servers, default/kubernetes
// first) with one plain netlink call per object and no diffing: the least work
// any proxier must do. It returns when default/kubernetes was done and when
// everything was.
func floorColdStart(k kernel, n, perService int) (kubeReady, complete time.Duration, err error) {
	start := time.Now()
	if err := k.links.EnsureLink(); err != nil {
		return 0, 0, err
	}
	for _, s := range []string{"KUBE-CLUSTER-IP", "KUBE-IPVS-IPS"} {
		t := ipset.HashIPPort
		if s == "KUBE-IPVS-IPS" {
			t = ipset.HashIP
		}
		if err := k.sets.EnsureSet(ipset.Set{Name: s, Type: t, Family: "inet", MaxElem: ipset.DefaultMaxElem}); err != nil {
			return 0, 0, err
		}
	}
	write := func(vip netip.Addr, port uint16, reals []netip.AddrPort) error {
		if err := k.links.AddAddress(vip); err != nil {
			return err
		}
		if err := k.sets.AddEntry("KUBE-CLUSTER-IP", ipset.Entry{IP: vip, Protocol: "tcp", Port: port}); err != nil {
			return err
		}
		if err := k.sets.AddEntry("KUBE-IPVS-IPS", ipset.Entry{IP: vip}); err != nil {
			return err
		}
		key := ipvs.Key{Address: vip, Protocol: ipvs.TCP, Port: port}
		if err := k.ipvs.AddVirtualServer(ipvs.VirtualServer{Key: key, Scheduler: "rr"}); err != nil {
			return err
		}
		for _, r := range reals {
			if err := k.ipvs.AddRealServer(key, ipvs.RealServer{Address: r.Addr(), Port: r.Port(), Weight: 1}); err != nil {
				return err
			}
		}
		return nil
	}
	if err := write(kubeVIP, 443, []netip.AddrPort{kubeReal}); err != nil {
		return 0, 0, err
	}
	kubeReady = time.Since(start)
	reals := make([]netip.AddrPort, perService)
	for i := 0; i < n; i++ {
		for j := range reals {
			reals[j] = netip.AddrPortFrom(endpointIP(i, j, perService), 8080)
		}
		if err := write(serviceIP(i), 80, reals); err != nil {
			return 0, 0, err
		}
	}
	return kubeReady, time.Since(start), nil
}

// floorOneChange times adding one real server to a full table, the kernel
// cost of one endpoint change.
func floorOneChange(k kernel, n, samples int) ([]time.Duration, error) {
	var out []time.Duration
	for s := 0; s < samples; s++ {
		i := (s * 7919) % n
		key := ipvs.Key{Address: serviceIP(i), Protocol: ipvs.TCP, Port: 80}
		start := time.Now()
		if err := k.ipvs.AddRealServer(key, ipvs.RealServer{Address: offset(extraBase, s), Port: 8080, Weight: 1}); err != nil {
			return out, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// extraBase is where the endpoints added by the one-change scenario live.
var extraBase = netip.MustParseAddr("10.200.0.0")
