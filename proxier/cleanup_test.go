package proxier

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

const savedWithOurs = `*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A POSTROUTING -j KUBE-KUBELET-CANARY
-A KUBE-SERVICES -j KUBE-POSTROUTING
COMMIT
*mangle
:KUBE-SERVICES - [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
-A INPUT -j ACCEPT
COMMIT
`

func TestCleanupPayloadTakesOnlyOurChains(t *testing.T) {
	got := string(cleanupPayload(savedWithOurs))
	want := `*nat
-D PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-D POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
:KUBE-POSTROUTING - [0:0]
:KUBE-SERVICES - [0:0]
-X KUBE-POSTROUTING
-X KUBE-SERVICES
COMMIT
`
	if got != want {
		t.Errorf("payload:\n%s\nwant:\n%s", got, want)
	}
	if p := cleanupPayload("*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n"); p != nil {
		t.Errorf("nothing of ours, yet a payload:\n%s", p)
	}
}

type recorder struct{ calls []string }

func (r *recorder) DeleteLink() error        { r.calls = append(r.calls, "delete-link"); return nil }
func (r *recorder) Destroy(set string) error { r.calls = append(r.calls, "destroy "+set); return nil }

func TestCleanupKeepsExcludedVirtualServers(t *testing.T) {
	v := ipvs.NewFake()
	ours := ipvs.VirtualServer{Key: ipvs.Key{Address: netip.MustParseAddr("10.96.0.1"), Protocol: ipvs.TCP, Port: 443}, Scheduler: "rr"}
	theirs := ipvs.VirtualServer{Key: ipvs.Key{Address: netip.MustParseAddr("10.250.99.1"), Protocol: ipvs.TCP, Port: 22}, Scheduler: "rr"}
	_ = v.AddVirtualServer(ours)
	_ = v.AddVirtualServer(theirs)
	v.TakeOps()
	r := &recorder{}
	if err := Cleanup(CleanupKernel{IPVS: v, Link: r, Sets: r}, []netip.Prefix{netip.MustParsePrefix("10.250.99.0/24")}); err != nil {
		t.Fatal(err)
	}
	if ops := v.TakeOps(); !slices.Equal(ops, []string{"delete-vs 10.96.0.1:443/TCP"}) {
		t.Errorf("IPVS writes %v", ops)
	}
	if r.calls[0] != "delete-link" || !slices.Contains(r.calls, "destroy KUBE-CLUSTER-IP") || !slices.Contains(r.calls, "destroy KUBE-6-CLUSTER-IP") {
		t.Errorf("calls %v", r.calls)
	}
	if strings.Contains(v.Dump(), "10.96.0.1") {
		t.Error("our virtual server is left")
	}
}
