package desired

import (
	"strings"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// The ipsets upstream kube-proxy creates in IPVS mode. Names and types are part
// of the drop-in contract: node tooling and iptables rules refer to them.
const (
	SetLoopBack              = "KUBE-LOOP-BACK"
	SetClusterIP             = "KUBE-CLUSTER-IP"
	SetExternalIP            = "KUBE-EXTERNAL-IP"
	SetExternalIPLocal       = "KUBE-EXTERNAL-IP-LOCAL"
	SetLoadBalancer          = "KUBE-LOAD-BALANCER"
	SetLoadBalancerFW        = "KUBE-LOAD-BALANCER-FW"
	SetLoadBalancerLocal     = "KUBE-LOAD-BALANCER-LOCAL"
	SetLoadBalancerSourceIP  = "KUBE-LOAD-BALANCER-SOURCE-IP"
	SetLoadBalancerSourceNet = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	SetNodePortTCP           = "KUBE-NODE-PORT-TCP"
	SetNodePortLocalTCP      = "KUBE-NODE-PORT-LOCAL-TCP"
	SetNodePortUDP           = "KUBE-NODE-PORT-UDP"
	SetNodePortLocalUDP      = "KUBE-NODE-PORT-LOCAL-UDP"
	SetNodePortSCTP          = "KUBE-NODE-PORT-SCTP-HASH"
	SetNodePortLocalSCTP     = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	SetHealthCheckNodePort   = "KUBE-HEALTH-CHECK-NODE-PORT"
	SetIPVSIPs               = "KUBE-IPVS-IPS"
)

func set(name string, t objects.SetType, comment string) objects.Set {
	return objects.Set{Name: name, Type: t, Family: "inet", HashSize: objects.DefaultHashSize, MaxElem: objects.DefaultMaxElem, Comment: comment}
}

// IPv4Sets are created at start-up, even those no Service uses yet, because
// the iptables rules match on them.
var IPv4Sets = []objects.Set{
	set(SetLoopBack, objects.HashIPPortIP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"),
	set(SetClusterIP, objects.HashIPPort, "Kubernetes service cluster ip + port for masquerade purpose"),
	set(SetExternalIP, objects.HashIPPort, "Kubernetes service external ip + port for masquerade and filter purpose"),
	set(SetExternalIPLocal, objects.HashIPPort, "Kubernetes service external ip + port with externalTrafficPolicy=local"),
	set(SetLoadBalancer, objects.HashIPPort, "Kubernetes service lb portal"),
	set(SetLoadBalancerFW, objects.HashIPPort, "Kubernetes service load balancer ip + port for load balancer with sourceRange"),
	set(SetLoadBalancerLocal, objects.HashIPPort, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"),
	set(SetLoadBalancerSourceIP, objects.HashIPPortIP, "Kubernetes service load balancer ip + port + source IP for packet filter purpose"),
	set(SetLoadBalancerSourceNet, objects.HashIPPortNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"),
	set(SetNodePortTCP, objects.BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"),
	set(SetNodePortLocalTCP, objects.BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"),
	set(SetNodePortUDP, objects.BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"),
	set(SetNodePortLocalUDP, objects.BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"),
	set(SetNodePortSCTP, objects.HashIPPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"),
	set(SetNodePortLocalSCTP, objects.HashIPPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"),
	set(SetHealthCheckNodePort, objects.BitmapPort, "Kubernetes health check node port"),
	set(SetIPVSIPs, objects.HashIP, "IPVS service ip"),
}

// IPv6SetName is upstream's name for the IPv6 twin of a set: a KUBE-6- prefix,
// cut to the kernel's 31-character limit.
func IPv6SetName(name string) string {
	n := "KUBE-6-" + strings.TrimPrefix(name, "KUBE-")
	if len(n) > 31 {
		n = n[:31]
	}
	return n
}

// AllSets are IPv4Sets and their IPv6 twins, in a new slice.
func AllSets() []objects.Set {
	return append(append([]objects.Set(nil), IPv4Sets...), ipv6Sets()...)
}

// ipv6Sets are the IPv6 twins of ipv4Sets. Upstream kube-proxy runs
// dual-stack on any kernel with IPv6 and creates them even for IPv4-only
// clusters; we create them too so that node state is the same.
func ipv6Sets() []objects.Set {
	out := make([]objects.Set, len(IPv4Sets))
	for i, s := range IPv4Sets {
		s.Name = IPv6SetName(s.Name)
		s.Family = "inet6"
		out[i] = s
	}
	return out
}
