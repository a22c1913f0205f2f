package main

import (
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
