package proxier

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// ruleAtFirstRealServer notes, through v's hook, whether ipt held rule
// when the first real server was added.
type ruleAtFirstRealServer struct {
	mu                  sync.Mutex
	sawAddedRS, hadRule bool
}

func watchRule(v *ipvs.Fake, ipt *iptables.Fake, rule string) *ruleAtFirstRealServer {
	w := &ruleAtFirstRealServer{}
	v.SetHook(func(op string) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if strings.HasPrefix(op, "add-rs ") && !w.sawAddedRS {
			saved, _ := ipt.Save()
			w.sawAddedRS, w.hadRule = true, strings.Contains(string(saved), rule)
		}
		return nil
	})
	return w
}

// TestGlueRulesComeBeforeTheirObjects: the hairpin rule for a node's first
// local endpoint is in iptables before its real server answers: a first
// connection made in between would keep its unmasqueraded conntrack entry.
func TestGlueRulesComeBeforeTheirObjects(t *testing.T) {
	ipt, v := &iptables.Fake{}, ipvs.NewFake()
	const rule = "--match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE"
	w := watchRule(v, ipt, rule)
	p := New(Config{Desired: desired.Config{NodeName: "me"}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour},
		Kernel{IPVS: v, Links: dummyiface.NewFake(), Sets: ipset.NewFake(), IPTables: ipt},
		zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
	p.OnServiceAdd(desired.ServiceOf(testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	if saved, _ := ipt.Save(); strings.Contains(string(saved), rule) {
		t.Fatal("hairpin rule without a local endpoint")
	}
	p.OnEndpointSliceAdd(desired.SliceOf(testobj.Slice("s-1", []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, testobj.EP{IP: "10.244.0.5", Ready: testobj.Yes, Node: "me"})))
	p.SyncNow()
	if !w.sawAddedRS || !w.hadRule {
		t.Errorf("real server added %v, with the hairpin rule already in place %v", w.sawAddedRS, w.hadRule)
	}
}

// TestBlockedRuleComesBeforeItsVIP: the rule that keeps the node from a
// load balancer is in place before the VIP's virtual server takes traffic.
func TestBlockedRuleComesBeforeItsVIP(t *testing.T) {
	ipt, v := &iptables.Fake{}, ipvs.NewFake()
	vip := ipset.Entry{IP: netip.MustParseAddr("198.51.100.7"), Protocol: ipset.EntryTCP, Port: 80}
	w := watchRule(v, ipt, "-A KUBE-IPVS-OUT-FILTER -s 198.51.100.7 -m ipvs --vaddr 198.51.100.7 --vproto tcp --vport 80 -j DROP")
	p := New(Config{Desired: desired.Config{NodeName: "me"}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour},
		Kernel{IPVS: v, Links: dummyiface.NewFake(), Sets: ipset.NewFake(), IPTables: ipt},
		zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
	s := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	s.Spec.Type, s.Spec.LoadBalancerSourceRanges = v1.ServiceTypeLoadBalancer, []string{"203.0.113.0/24"}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: vip.IP.String()}}
	p.OnServiceAdd(desired.ServiceOf(s))
	p.OnEndpointSliceAdd(desired.SliceOf(testobj.Slice("s-1", []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, testobj.EP{IP: "10.244.0.5", Ready: testobj.Yes, Node: "me"})))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	if !w.sawAddedRS || !w.hadRule {
		t.Errorf("real server added %v, with the blocked VIP's rule already in place %v", w.sawAddedRS, w.hadRule)
	}
}

// TestHealthCheckPortTakenIsReportedAndRetriedSoon: a health-check port
// someone else holds is one Event and one log line, tried again within
// healthCheckRetry (not only at the next change or drift check), and
// served once free.
func TestHealthCheckPortTakenIsReportedAndRetriedSoon(t *testing.T) {
	squatter, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := squatter.Addr().(*net.TCPAddr).Port
	p, _, _, ev := newTestProxier(t)
	defer p.checks.server.Close()
	lb := testobj.Service("10.96.0.10", v1.ServicePort{Protocol: v1.ProtocolTCP, Port: 80, NodePort: 30080})
	lb.Spec.Type, lb.Spec.ExternalTrafficPolicy = v1.ServiceTypeLoadBalancer, v1.ServiceExternalTrafficPolicyLocal
	lb.Spec.HealthCheckNodePort = int32(port)
	p.OnServiceAdd(desired.ServiceOf(lb))
	p.OnEndpointSliceAdd(desired.SliceOf(testobj.Slice("s-1", []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)},
		testobj.EP{IP: "10.244.0.5", Node: "me"})))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	p.SyncNow()
	if n := strings.Count(strings.Join(*ev, "\n"), "FailedToStartServiceHealthcheck"); n != 1 {
		t.Errorf("%d FailedToStartServiceHealthcheck Events, want 1: %q", n, *ev)
	}
	if at := p.checks.retryAt; at.IsZero() || time.Until(at) > healthCheckRetry {
		t.Errorf("the health check is retried at %v, want within %s", at, healthCheckRetry)
	}
	squatter.Close()
	p.SyncNow()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/healthz")
	if err != nil {
		t.Fatalf("the health check once its port was free: %v", err)
	}
	resp.Body.Close()
	if !p.checks.retryAt.IsZero() {
		t.Error("still retrying after the port opened")
	}
}

// TestFirstSyncKeepsTheEarlySetupsChains: on a dual-stack node whose
// Services are all IPv4, the chains the setup wrote while the informers
// listed are those the first sync wants, so it restores neither family
// again: an iptables-restore is a process on the path of every cold start
// and restart.
func TestFirstSyncKeepsTheEarlySetupsChains(t *testing.T) {
	k := fakekernel.Bare()
	ipt, ip6t := &iptables.Fake{}, &iptables.Fake{}
	p := New(Config{Desired: desired.Config{NodeName: "me", IPv6Capable: true}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour},
		Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: ipt, IP6Tables: ip6t}, zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
	steps := []chan error{make(chan error, 1), make(chan error, 1)}
	p.setup.early.steps = steps
	p.setUpEarly(steps)
	early, early6 := len(ipt.Payloads), len(ip6t.Payloads)
	if early != 1 || early6 != 1 {
		t.Fatalf("the early setup restored %d IPv4 and %d IPv6 payloads, want one each", early, early6)
	}
	kubernetes := testobj.Service("10.96.0.1", testobj.Port("https", v1.ProtocolTCP, 443))
	kubernetes.Namespace, kubernetes.Name = "default", "kubernetes"
	p.OnServiceAdd(desired.ServiceOf(kubernetes))
	p.OnServiceAdd(desired.ServiceOf(testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	if !strings.Contains(k.IPVS.Dump(), "10.96.0.10:80/TCP") {
		t.Fatalf("the first sync did not program the Service:\n%s", k.IPVS.Dump())
	}
	if len(ipt.Payloads) != early || len(ip6t.Payloads) != early6 {
		t.Errorf("the first sync restored the chains again: IPv4 %q, IPv6 %q", ipt.Payloads[early:], ip6t.Payloads[early6:])
	}
}
