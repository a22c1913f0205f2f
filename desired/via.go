package desired

// Via says how a Service came to want a virtual server.
type Via uint8

const (
	ViaClusterIP Via = iota
	ViaNodePort
	ViaExternalIP
	ViaLoadBalancer
)

func (k Via) String() string {
	return [...]string{"cluster IP", "node port", "external IP", "load-balancer ingress IP"}[k]
}

// Allocated says whether the apiserver hands the address out once per
// cluster (cluster IPs, node ports), where a tenant writes external and
// ingress IPs freely (CVE-2020-8554).
func (k Via) Allocated() bool { return k == ViaClusterIP || k == ViaNodePort }
