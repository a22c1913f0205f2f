package proxier

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// A Service that changed is written before the other dirty objects of its
// sync, here a drift check's repair of 100 virtual servers another program
// deleted: its change waits for no more than the sync under way.
func TestChangedServicesAreWrittenFirst(t *testing.T) {
	p, k, _, _ := newTestProxier(t)
	var ports []v1.ServicePort
	for i := range 100 {
		ports = append(ports, testobj.Port(fmt.Sprint("p", i), v1.ProtocolTCP, int32(1000+i)))
	}
	big := testobj.Service("10.96.0.10", ports...)
	big.Name = "big"
	p.OnServiceAdd(desired.ServiceOf(big))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	for i := range 100 {
		key := ipvs.Key{Address: netip.MustParseAddr("10.96.0.10"), Protocol: ipvs.TCP, Port: uint16(1000 + i)}
		if err := k.IPVS.DeleteVirtualServer(key); err != nil {
			t.Fatal(err)
		}
	}
	k.IPVS.TakeOps()

	small := testobj.Service("10.96.0.20", testobj.Port("", v1.ProtocolTCP, 80))
	small.Name = "small"
	p.OnServiceAdd(desired.ServiceOf(small))
	p.drift.needFull = true // the drift check finds big's virtual servers gone
	p.SyncNow()
	ops := k.IPVS.TakeOps()
	if len(ops) != 101 || !strings.HasPrefix(ops[0], "add-vs 10.96.0.20:80/TCP") {
		t.Fatalf("%d IPVS writes, the first %q; want 101, the changed Service's first", len(ops), ops[0])
	}
}
