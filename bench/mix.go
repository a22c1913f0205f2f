package main

import (
	"fmt"
	"net/netip"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// The mixed scenario (-mix mixed): of every 100 Services, 10 are NodePorts
// with externalTrafficPolicy Local, 10 NodePorts with Cluster, 5
// LoadBalancers with two source ranges (and their node ports), 5 ClusterIPs
// with an external IP, and the rest plain ClusterIPs; the node has three
// addresses (mixNodeAddrs). The default mix has plain ClusterIPs alone.
const mixMixed = "mixed"

// mixNodeAddrs are the node's addresses besides eth0's 10.0.2.15 in the mixed
// scenario, on a dummy link of their own (mixLink) that the bench creates.
var mixNodeAddrs = []netip.Addr{netip.MustParseAddr("10.0.3.15"), netip.MustParseAddr("10.0.4.15")}

const mixLink = "bench0"

// mixMax is the most Services the mixed scenario has node ports for: 25 in
// every 100 take one from 30000-32767.
const mixMax = 11000

// shape is what Service i is in a mix.
type shape struct {
	nodePort int32      // 0 for none
	local    bool       // externalTrafficPolicy Local
	ingress  netip.Addr // a LoadBalancer's ingress IP
	external netip.Addr // an external IP
}

// lbSourceRanges are every mixed LoadBalancer's source ranges; neither holds
// the node, which is then blocked from the VIP as well.
var lbSourceRanges = []string{"192.168.0.0/16", "172.16.0.0/12"}

func shapeOf(i int, mix string) shape {
	if mix != mixMixed {
		return shape{}
	}
	var s shape
	k := i % 100
	if k < 25 {
		s.nodePort = int32(30000 + i/100*25 + k)
	}
	switch {
	case k < 10:
		s.local = true
	case k >= 20 && k < 25:
		s.ingress = offset(netip.MustParseAddr("10.251.0.0"), i)
	case k >= 25 && k < 30:
		s.external = offset(netip.MustParseAddr("10.250.0.0"), i)
	}
	return s
}

// benchService is Service i of the mix, on serviceIP(i):80/TCP.
func benchService(i int, mix string) *v1.Service {
	svc := framework.ClusterIPService(namespace, serviceName(i), serviceIP(i).String(),
		framework.Port("http", v1.ProtocolTCP, 80, 8080))
	s := shapeOf(i, mix)
	if s.nodePort != 0 {
		svc.Spec.Type = v1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = s.nodePort
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		if s.local {
			svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		}
	}
	if s.ingress.IsValid() {
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Spec.LoadBalancerSourceRanges = lbSourceRanges
		svc.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: s.ingress.String()}}
	}
	if s.external.IsValid() {
		svc.Spec.ExternalIPs = []string{s.external.String()}
	}
	if mix == mixDual {
		dualStack(svc, i)
	}
	return svc
}

// kernelObjects are the netlink-written kernel objects one Service needs:
// what the floor writes and complete counts.
type kernelObjects struct {
	virtualServers []ipvs.Key // each with the Service's endpoints
	addresses      []netip.Addr
	entries        []benchEntry
}

type benchEntry struct {
	set   string
	entry ipset.Entry
}

// benchSets are the sets the mixes fill, with their types.
var benchSets = map[string]ipset.Type{
	"KUBE-CLUSTER-IP": ipset.HashIPPort, "KUBE-IPVS-IPS": ipset.HashIP,
	"KUBE-NODE-PORT-TCP": ipset.BitmapPort, "KUBE-NODE-PORT-LOCAL-TCP": ipset.BitmapPort,
	"KUBE-LOAD-BALANCER": ipset.HashIPPort, "KUBE-LOAD-BALANCER-FW": ipset.HashIPPort,
	"KUBE-LOAD-BALANCER-SOURCE-CIDR": ipset.HashIPPortNet, "KUBE-EXTERNAL-IP": ipset.HashIPPort,
	"KUBE-6-CLUSTER-IP": ipset.HashIPPort, "KUBE-6-IPVS-IPS": ipset.HashIP,
}

// setFamily is a bench set's family: upstream's IPv6 twins of the sets are
// named KUBE-6-.
func setFamily(name string) string {
	if strings.HasPrefix(name, "KUBE-6-") {
		return "inet6"
	}
	return "inet"
}

// objectsOf lists Service i's kernel objects in a mix, as upstream's IPVS
// mode programs them with nodeAddrs as the node's addresses.
func objectsOf(i int, mix string, nodeAddrs []netip.Addr) kernelObjects {
	s := shapeOf(i, mix)
	vip := serviceIP(i)
	vipPort := func(a netip.Addr) ipset.Entry { return ipset.Entry{IP: a, Protocol: ipset.EntryTCP, Port: 80} }
	o := kernelObjects{
		virtualServers: []ipvs.Key{{Address: vip, Protocol: ipvs.TCP, Port: 80}},
		addresses:      []netip.Addr{vip},
		entries:        []benchEntry{{"KUBE-CLUSTER-IP", vipPort(vip)}},
	}
	for _, a := range []netip.Addr{s.ingress, s.external} {
		if a.IsValid() {
			o.virtualServers = append(o.virtualServers, ipvs.Key{Address: a, Protocol: ipvs.TCP, Port: 80})
			o.addresses = append(o.addresses, a)
		}
	}
	if s.nodePort != 0 {
		for _, a := range nodeAddrs {
			o.virtualServers = append(o.virtualServers, ipvs.Key{Address: a, Protocol: ipvs.TCP, Port: uint16(s.nodePort)})
		}
		o.entries = append(o.entries, benchEntry{"KUBE-NODE-PORT-TCP", ipset.Entry{Port: uint16(s.nodePort)}})
		if s.local {
			o.entries = append(o.entries, benchEntry{"KUBE-NODE-PORT-LOCAL-TCP", ipset.Entry{Port: uint16(s.nodePort)}})
		}
	}
	if s.ingress.IsValid() {
		o.entries = append(o.entries, benchEntry{"KUBE-LOAD-BALANCER", vipPort(s.ingress)}, benchEntry{"KUBE-LOAD-BALANCER-FW", vipPort(s.ingress)})
		for _, r := range lbSourceRanges {
			e := vipPort(s.ingress).WithNet(netip.MustParsePrefix(r))
			o.entries = append(o.entries, benchEntry{"KUBE-LOAD-BALANCER-SOURCE-CIDR", e})
		}
	}
	if s.external.IsValid() {
		o.entries = append(o.entries, benchEntry{"KUBE-EXTERNAL-IP", vipPort(s.external)})
	}
	if mix == mixDual {
		vip6 := serviceIPv6(i)
		o.virtualServers = append(o.virtualServers, ipvs.Key{Address: vip6, Protocol: ipvs.TCP, Port: 80})
		o.addresses = append(o.addresses, vip6)
		o.entries = append(o.entries, benchEntry{"KUBE-6-CLUSTER-IP", vipPort(vip6)})
	}
	for _, a := range o.addresses {
		set := "KUBE-IPVS-IPS"
		if a.Is6() {
			set = "KUBE-6-IPVS-IPS"
		}
		o.entries = append(o.entries, benchEntry{set, ipset.Entry{IP: a}})
	}
	return o
}

// clusterIPs counts Service i's cluster IPs in a mix.
func clusterIPs(mix string) int {
	if mix == mixDual {
		return 2
	}
	return 1
}

// nodeAddrsOf are the node's addresses the mix's node ports are served on.
func nodeAddrsOf(mix string) []netip.Addr {
	if mix != mixMixed {
		return nil
	}
	return append([]netip.Addr{netip.MustParseAddr("10.0.2.15")}, mixNodeAddrs...)
}

// addNodeAddrs gives the node the mix's extra addresses, on a dummy link
// that only the bench uses.
func addNodeAddrs(mix string) error {
	if mix != mixMixed {
		return nil
	}
	cmds := [][]string{{"ip", "link", "add", mixLink, "type", "dummy"}, {"ip", "link", "set", mixLink, "up"}}
	for _, a := range mixNodeAddrs {
		cmds = append(cmds, []string{"ip", "addr", "add", a.String() + "/32", "dev", mixLink})
	}
	for _, c := range cmds {
		if _, err := framework.Output(c...); err != nil {
			return fmt.Errorf("mixed scenario's node addresses: %w", err)
		}
	}
	return nil
}
