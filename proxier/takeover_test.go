package proxier

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

// iptablesMode is the dispatch kube-proxy's iptables mode leaves in the
// chains it shares with us by name.
const iptablesMode = `*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-WEB - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-WEB
COMMIT
`

// TestTakeoverFromIPTablesModeWritesChainsAfterIPVS: where iptables mode's
// rules still answer, our chains (which replace them) are written only
// once the first sync has programmed IPVS, so that one or the other
// answers all along.
func TestTakeoverFromIPTablesModeWritesChainsAfterIPVS(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t)
	if err := ipt.Restore([]byte(iptablesMode)); err != nil {
		t.Fatal(err)
	}
	var ipvsAtRestore []string
	ipt.SetHook(func(op string) error {
		if op == "restore" {
			ipvsAtRestore = append(ipvsAtRestore, k.IPVS.Dump())
		}
		return nil
	})
	web := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	web.Name = "web"
	p.OnServiceAdd(desired.ServiceOf(web))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	if err := p.setupKernel(false); err != nil { // the early setup
		t.Fatal(err)
	}
	p.SyncNow()

	if len(ipvsAtRestore) == 0 {
		t.Fatal("our chains were never written")
	}
	if !strings.Contains(ipvsAtRestore[0], "10.96.0.10:80/TCP") {
		t.Errorf("our chains were written before the virtual server; IPVS then held:\n%s", ipvsAtRestore[0])
	}
	if dump := ipt.Dump(); strings.Contains(dump, "-j KUBE-SVC-WEB") || !strings.Contains(dump, "KUBE-CLUSTER-IP") {
		t.Errorf("after the first sync KUBE-SERVICES is not ours:\n%s", dump)
	}
	if !p.IPTablesModeLeft() {
		t.Error("iptables mode's chains not noticed")
	}
	// On a node with our chains alone, the next start writes them at once.
	again, _, ipt2, _ := newTestProxier(t)
	if err := ipt2.Restore([]byte(ipt.Dump())); err != nil {
		t.Fatal(err)
	}
	again.lookForIPTablesMode()
	if again.setup.takeover.Load() {
		t.Error("our own chains were taken for iptables mode's")
	}
}
