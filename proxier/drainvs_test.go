package proxier

import (
	"net/netip"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestDeletedServiceDrains: a deleted TCP Service keeps its virtual server
// and address while a connection lasts, then goes whole; a UDP one, or one
// without real servers, goes at once; one re-created meanwhile is served
// again as it was.
func TestDeletedServiceDrains(t *testing.T) {
	k := newFakeKernel(t)
	r := k.reconciler()
	web := ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 80}
	pod := netip.MustParseAddrPort("10.244.0.1:8080")
	r.setService(name("web"), state("10.96.0.1", 80, pod.String()))
	r.setService(name("dns"), udpState("10.96.0.2", "10.244.0.2:5353"))
	r.setService(name("empty"), state("10.96.0.3", 80))
	mustApply(t, r)
	k.ipvs.SetConnections(web, pod, 1, 0)
	k.ops()

	for _, n := range []string{"web", "dns", "empty"} {
		r.setService(name(n), serviceState{})
	}
	mustApply(t, r)
	expectOps(t, k,
		"delete-addr 10.96.0.2", "delete-addr 10.96.0.3",
		"delete-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:80", "delete-entry KUBE-CLUSTER-IP 10.96.0.2,udp:53", "delete-entry KUBE-CLUSTER-IP 10.96.0.3,tcp:80",
		"delete-entry KUBE-IPVS-IPS 10.96.0.2", "delete-entry KUBE-IPVS-IPS 10.96.0.3",
		"delete-vs 10.96.0.2:53/UDP", "delete-vs 10.96.0.3:80/TCP",
		"update-rs 10.96.0.1:80/TCP 10.244.0.1:8080 weight=0")

	// The connection lasts: drift checks keep everything.
	mustRefresh(t, r)
	mustRefresh(t, r)
	expectOps(t, k)
	if has, _ := k.sets.Has(setIPVSIPs, ipset.Entry{IP: web.Address}); !has {
		t.Error("the draining VIP left KUBE-IPVS-IPS: the node's own ports would answer on it")
	}

	// Re-created while draining: served again, nothing deleted.
	r.setService(name("web"), state("10.96.0.1", 80, pod.String()))
	mustApply(t, r)
	expectOps(t, k, "add-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:80", "update-rs 10.96.0.1:80/TCP 10.244.0.1:8080 weight=1")
	k.ipvs.SetConnections(web, pod, 0, 0)
	mustRefresh(t, r)
	expectOps(t, k)

	// Deleted again; once the connection has ended, it all goes.
	r.setService(name("web"), serviceState{})
	mustApply(t, r)
	mustRefresh(t, r)
	expectOps(t, k, "delete-addr 10.96.0.1", "delete-entry KUBE-CLUSTER-IP 10.96.0.1,tcp:80", "delete-entry KUBE-IPVS-IPS 10.96.0.1",
		"delete-rs 10.96.0.1:80/TCP 10.244.0.1:8080", "delete-vs 10.96.0.1:80/TCP", "update-rs 10.96.0.1:80/TCP 10.244.0.1:8080 weight=0")
	if len(r.drainingVS) != 0 || k.links.Dump() != "" {
		t.Errorf("left draining %v, addresses %q", r.drainingVS, k.links.Dump())
	}
}
