package main

import (
	"net/netip"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestMixedShares: the mixed scenario has the shares of each kind
// of Service, and a node port of its own for each Service that needs one.
func TestMixedShares(t *testing.T) {
	const n = 10000
	count := map[string]int{}
	ports := map[int32]bool{}
	for i := 0; i < mixMax; i++ {
		svc := benchService(i, mixMixed)
		if p := svc.Spec.Ports[0].NodePort; p != 0 {
			if ports[p] || p < 30000 || p > 32767 {
				t.Fatalf("Service %d: node port %d taken or out of range", i, p)
			}
			ports[p] = true
		}
		if i >= n {
			continue
		}
		switch {
		case svc.Spec.Type == v1.ServiceTypeLoadBalancer && len(svc.Spec.LoadBalancerSourceRanges) > 0 && len(svc.Status.LoadBalancer.Ingress) == 1:
			count["LoadBalancer"]++
		case svc.Spec.Type == v1.ServiceTypeNodePort:
			count["NodePort"]++
		case len(svc.Spec.ExternalIPs) == 1:
			count["external IP"]++
		}
		if svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
			count["Local"]++
		}
	}
	for kind, want := range map[string]int{"NodePort": 2000, "LoadBalancer": 500, "external IP": 500, "Local": 1000} {
		if count[kind] != want {
			t.Errorf("%s: %d of %d Services, want %d", kind, count[kind], n, want)
		}
	}
	// A LoadBalancer: its cluster IP, ingress IP and a node port on each
	// of the 3 node addresses.
	lb := objectsOf(20, mixMixed, nodeAddrsOf(mixMixed))
	if len(lb.virtualServers) != 5 || len(lb.addresses) != 2 {
		t.Errorf("LoadBalancer objects %+v, want 5 virtual servers and 2 addresses", lb)
	}
	if plain := objectsOf(20, "", nil); len(plain.virtualServers) != 1 || len(plain.entries) != 2 {
		t.Errorf("the default mix's Service 20: %+v, want a ClusterIP's objects", plain)
	}
}

// TestDualStackObjects: in the dual-stack mix every Service has a cluster IP
// of each family inside testcluster's ranges, an IPv6 slice whose endpoints
// are its own, and each family's kernel objects, the IPv6 ones in the
// KUBE-6- sets.
func TestDualStackObjects(t *testing.T) {
	v4, v6 := netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")
	seen := map[netip.Addr]bool{}
	for _, i := range []int{0, 1, 9999, 49999} {
		svc := benchService(i, mixDual)
		if len(svc.Spec.ClusterIPs) != 2 || !v4.Contains(netip.MustParseAddr(svc.Spec.ClusterIPs[0])) ||
			!v6.Contains(netip.MustParseAddr(svc.Spec.ClusterIPs[1])) || len(svc.Spec.IPFamilies) != 2 {
			t.Errorf("Service %d: cluster IPs %v, families %v", i, svc.Spec.ClusterIPs, svc.Spec.IPFamilies)
		}
		sl := benchSliceV6(i, 10)
		for _, ep := range sl.Endpoints {
			a := netip.MustParseAddr(ep.Addresses[0])
			if !a.Is6() || seen[a] {
				t.Errorf("Service %d: endpoint %s not IPv6 or not its own", i, a)
			}
			seen[a] = true
		}
	}
	o := objectsOf(3, mixDual, nil)
	sets := map[string]netip.Addr{}
	for _, e := range o.entries {
		sets[e.set] = e.entry.IP
	}
	if len(o.virtualServers) != 2 || !o.virtualServers[1].Address.Is6() || len(o.addresses) != 2 ||
		!sets["KUBE-6-CLUSTER-IP"].Is6() || !sets["KUBE-6-IPVS-IPS"].Is6() || !sets["KUBE-IPVS-IPS"].Is4() || len(o.entries) != 4 {
		t.Errorf("dual-stack Service 3's objects %+v", o)
	}
	if w := wantedObjects(10, mixDual); w.clusterIPs != 21 || w.virtualServers != 21 {
		t.Errorf("10 dual-stack Services want %+v", w)
	}
}
