package proxier

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
)

// A set the kernel refuses to create (Linux 5.10 refused KUBE-LOOP-BACK at
// the revision we once pinned) is reported and retried alone: the
// Services are programmed meanwhile, the chains are written without the
// rules that match on that set, and once the set is made its entries and
// rules follow.
func TestARefusedSetHoldsBackOnlyWhatNeedsIt(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t)
	k.Sets.SetHook(oplog.Refuse("create-set " + desired.SetLoopBack))
	web := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	web.Name = "web"
	local := testobj.Slice("web-1", []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, testobj.EP{IP: "10.244.0.1", Node: "me"})
	local.Labels[discovery.LabelServiceName] = "web"
	p.OnServiceAdd(desired.ServiceOf(web))
	p.OnEndpointSliceAdd(desired.SliceOf(local))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()

	if !strings.Contains(k.IPVS.Dump(), "-a 10.96.0.10:80/TCP -r 10.244.0.1:8080") {
		t.Fatalf("the Service waits for a set it does not need to answer:\n%s", k.IPVS.Dump())
	}
	if !strings.Contains(k.Links.Dump(), "10.96.0.10") {
		t.Fatalf("the cluster IP is not bound:\n%s", k.Links.Dump())
	}
	if has, err := k.Sets.Has(desired.SetClusterIP, ipset.Entry{IP: netip.MustParseAddr("10.96.0.10"), Protocol: ipset.EntryTCP, Port: 80}); !has || err != nil {
		t.Fatalf("the cluster IP's entry is missing from its set: %v", err)
	}
	saved, _ := ipt.Save()
	if strings.Contains(string(saved), desired.SetLoopBack) || !strings.Contains(string(saved), "--match-set "+desired.SetClusterIP) {
		t.Fatalf("the chains must be written, without the rules on the refused set:\n%s", saved)
	}
	if !p.setup.status.Failing(setupKey) || failedObjects(t, p, "setup") != 1 {
		t.Fatal("the refused set is not reported as a failed setup")
	}
	if f, _ := p.setup.status.Failure(setupKey); f.Err == nil || !strings.Contains(f.Err.Error(), desired.SetLoopBack) {
		t.Fatalf("the setup's error does not name the set: %v", f.Err)
	}

	// Meanwhile the chains follow the Services at each sync, without
	// waiting for the setup's retry.
	p.OnServiceAdd(desired.ServiceOf(externalService("ext", "10.96.0.11", "192.0.2.11")))
	p.SyncNow()
	if c := ipt.Dump(); !strings.Contains(c, externalRule) {
		t.Fatalf("a new external IP's rule waits for the refused set:\n%s", c)
	}

	// The kernel takes the set at the retry: its entry and its rule follow,
	// the rule (and with it the VIP filter) only once the entry is in.
	const loopRule = "--match-set " + desired.SetLoopBack + " dst,dst,src -j MASQUERADE"
	ruleBeforeEntry := false
	k.Sets.SetHook(func(op string) error {
		if strings.HasPrefix(op, "add-entry "+desired.SetLoopBack) && strings.Contains(ipt.Dump(), loopRule) {
			ruleBeforeEntry = true
		}
		return nil
	})
	p.setup.status.RetryNow(setupKey)
	p.SyncNow()
	p.SyncNow() // the sync the retry's end triggers
	if ruleBeforeEntry {
		t.Error("the set's rules came back before its entries")
	}
	if p.setup.status.Failing(setupKey) {
		f, _ := p.setup.status.Failure(setupKey)
		t.Fatalf("the retried setup failed: %v", f.Err)
	}
	loop := ipset.Entry{IP: netip.MustParseAddr("10.244.0.1"), Protocol: ipset.EntryTCP, Port: 8080, IP2: netip.MustParseAddr("10.244.0.1")}
	if has, err := k.Sets.Has(desired.SetLoopBack, loop); !has || err != nil {
		t.Fatalf("the hairpin entry was not written once the set was made: %v", err)
	}
	saved, _ = ipt.Save()
	if !strings.Contains(string(saved), loopRule) {
		t.Fatalf("the hairpin rule was not written once the set was made:\n%s", saved)
	}
}
