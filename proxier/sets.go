package proxier

import (
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
)

// The ipsets upstream kube-proxy creates in IPVS mode. Names and types are part
// of the drop-in contract: node tooling and iptables rules refer to them.
const (
	setLoopBack              = "KUBE-LOOP-BACK"
	setClusterIP             = "KUBE-CLUSTER-IP"
	setExternalIP            = "KUBE-EXTERNAL-IP"
	setExternalIPLocal       = "KUBE-EXTERNAL-IP-LOCAL"
	setLoadBalancer          = "KUBE-LOAD-BALANCER"
	setLoadBalancerFW        = "KUBE-LOAD-BALANCER-FW"
	setLoadBalancerLocal     = "KUBE-LOAD-BALANCER-LOCAL"
	setLoadBalancerSourceIP  = "KUBE-LOAD-BALANCER-SOURCE-IP"
	setLoadBalancerSourceNet = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	setNodePortTCP           = "KUBE-NODE-PORT-TCP"
	setNodePortLocalTCP      = "KUBE-NODE-PORT-LOCAL-TCP"
	setNodePortUDP           = "KUBE-NODE-PORT-UDP"
	setNodePortLocalUDP      = "KUBE-NODE-PORT-LOCAL-UDP"
	setNodePortSCTP          = "KUBE-NODE-PORT-SCTP-HASH"
	setNodePortLocalSCTP     = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	setHealthCheckNodePort   = "KUBE-HEALTH-CHECK-NODE-PORT"
	setIPVSIPs               = "KUBE-IPVS-IPS"
)

func set(name string, t ipset.Type, comment string) ipset.Set {
	return ipset.Set{Name: name, Type: t, Family: "inet", HashSize: ipset.DefaultHashSize, MaxElem: ipset.DefaultMaxElem, Comment: comment}
}

// ipv4Sets are created at start-up, even those no Service uses yet, because
// the iptables rules match on them.
var ipv4Sets = []ipset.Set{
	set(setLoopBack, ipset.HashIPPortIP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"),
	set(setClusterIP, ipset.HashIPPort, "Kubernetes service cluster ip + port for masquerade purpose"),
	set(setExternalIP, ipset.HashIPPort, "Kubernetes service external ip + port for masquerade and filter purpose"),
	set(setExternalIPLocal, ipset.HashIPPort, "Kubernetes service external ip + port with externalTrafficPolicy=local"),
	set(setLoadBalancer, ipset.HashIPPort, "Kubernetes service lb portal"),
	set(setLoadBalancerFW, ipset.HashIPPort, "Kubernetes service load balancer ip + port for load balancer with sourceRange"),
	set(setLoadBalancerLocal, ipset.HashIPPort, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"),
	set(setLoadBalancerSourceIP, ipset.HashIPPortIP, "Kubernetes service load balancer ip + port + source IP for packet filter purpose"),
	set(setLoadBalancerSourceNet, ipset.HashIPPortNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"),
	set(setNodePortTCP, ipset.BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"),
	set(setNodePortLocalTCP, ipset.BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"),
	set(setNodePortUDP, ipset.BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"),
	set(setNodePortLocalUDP, ipset.BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"),
	set(setNodePortSCTP, ipset.HashIPPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"),
	set(setNodePortLocalSCTP, ipset.HashIPPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"),
	set(setHealthCheckNodePort, ipset.BitmapPort, "Kubernetes health check node port"),
	set(setIPVSIPs, ipset.HashIP, "IPVS service ip"),
}

// ipv6SetName is upstream's name for the IPv6 twin of a set: a KUBE-6- prefix,
// cut to the kernel's 31-character limit.
func ipv6SetName(name string) string {
	n := "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
	if len(n) > 31 {
		n = n[:31]
	}
	return n
}

// allSets are ipv4Sets and their IPv6 twins, in a new slice.
func allSets() []ipset.Set {
	return append(append([]ipset.Set(nil), ipv4Sets...), ipv6Sets()...)
}

// ipv6Sets are the IPv6 twins of ipv4Sets. Upstream kube-proxy runs
// dual-stack on any kernel with IPv6 and creates them even for IPv4-only
// clusters; we create them too so that node state is the same.
func ipv6Sets() []ipset.Set {
	out := make([]ipset.Set, len(ipv4Sets))
	for i, s := range ipv4Sets {
		s.Name = ipv6SetName(s.Name)
		s.Family = "inet6"
		out[i] = s
	}
	return out
}
