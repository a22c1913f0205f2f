package proxier

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// The critical Services are programmed from their own feed, with the
// iptables glue, while the cluster-wide caches still list; an endpoint
// change on the feed is programmed too. Once the caches sync, the feed is
// stopped and the first sync writes nothing more for them.
func TestCriticalServicesProgrammedBeforeTheCachesSync(t *testing.T) {
	p, k, ipt, _ := newTestProxier(t)
	p.cfg.CriticalServices = []types.NamespacedName{{Namespace: "default", Name: "kubernetes"}}
	feed := p.Critical()

	api := testobj.Service("10.96.0.1", testobj.Port("https", v1.ProtocolTCP, 443))
	api.Namespace, api.Name = "default", "kubernetes"
	eps := func(ips ...string) *discovery.EndpointSlice {
		var list []testobj.EP
		for _, ip := range ips {
			list = append(list, testobj.EP{IP: ip})
		}
		s := testobj.Slice("kubernetes", []discovery.EndpointPort{testobj.SlicePort("https", v1.ProtocolTCP, 6443)}, list...)
		s.Namespace, s.Labels[discovery.LabelServiceName] = "default", "kubernetes"
		return s
	}
	web := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	web.Name = "web"

	feed.OnServiceAdd(desired.ServiceOf(api))
	feed.OnEndpointSliceAdd(desired.SliceOf(eps("10.0.2.100")))
	p.OnServiceAdd(desired.ServiceOf(web)) // the cluster-wide list is under way
	p.SyncNow()
	if k.IPVS.Dump() != "" {
		t.Fatalf("programmed before the critical feed had its list:\n%s", k.IPVS.Dump())
	}

	feed.OnServicesSynced()
	feed.OnEndpointSlicesSynced()
	p.SyncNow()
	if got, want := k.IPVS.Dump(), "-A 10.96.0.1:443/TCP -s rr\n-a 10.96.0.1:443/TCP -r 10.0.2.100:6443 -w 1"; got != want {
		t.Fatalf("before the caches synced the kernel holds\n%s\nwant default/kubernetes alone:\n%s", got, want)
	}
	if k.Links.Dump() != "10.96.0.1" || !strings.Contains(k.Sets.Dump(), "add KUBE-CLUSTER-IP 10.96.0.1,tcp:443") {
		t.Fatalf("address or entries missing:\n%s\n%s", k.Links.Dump(), k.Sets.Dump())
	}
	if saved, _ := ipt.Save(); !strings.Contains(string(saved), "-A KUBE-POSTROUTING") {
		t.Fatal("the masquerade glue is not in place for the critical Service")
	}

	feed.OnEndpointSliceUpdate(desired.SliceOf(eps("10.0.2.100")), desired.SliceOf(eps("10.0.2.100", "10.0.2.101")))
	p.SyncNow()
	if !strings.Contains(k.IPVS.Dump(), "-r 10.0.2.101:6443") {
		t.Fatalf("an endpoint added before the caches synced was not programmed:\n%s", k.IPVS.Dump())
	}

	// The caches sync with the same objects.
	k.Ops()
	p.OnServiceAdd(desired.ServiceOf(api))
	p.OnEndpointSliceAdd(desired.SliceOf(eps("10.0.2.100", "10.0.2.101")))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	for _, op := range k.Ops() {
		if strings.Contains(op, "10.96.0.1:") || strings.HasSuffix(op, " 10.96.0.1") || strings.Contains(op, " 10.96.0.1,") {
			t.Errorf("the first sync rewrote default/kubernetes: %s", op)
		}
	}
	if !strings.Contains(k.IPVS.Dump(), "-A 10.96.0.10:80/TCP") {
		t.Fatal("the first sync did not program the other Services")
	}
	select {
	case <-feed.Stop:
	default:
		t.Fatal("the critical feed is not stopped after the caches synced")
	}
}

// TestCriticalServicesWaitForTheirOwnFamilysChains: the setup started
// with Run writes the IPv4 chains, then the IPv6 ones. An IPv4 critical
// Service is programmed while ip6tables still runs (here: hangs); an IPv6
// one only once its chains are written.
func TestCriticalServicesWaitForTheirOwnFamilysChains(t *testing.T) {
	for _, clusterIP := range []string{"10.96.0.1", "fd00::1"} {
		t.Run(clusterIP, func(t *testing.T) {
			p, k, release, atIPv6Chains := startHungIPv6(t, types.NamespacedName{Namespace: "default", Name: "kubernetes"})

			api := localOnly("kubernetes", clusterIP)
			api.Namespace = "default"
			feed := p.Critical()
			feed.OnServiceAdd(desired.ServiceOf(api))
			feed.OnServicesSynced()
			feed.OnEndpointSlicesSynced()
			vs := "-A " + netip.AddrPortFrom(netip.MustParseAddr(clusterIP), 80).String() + "/TCP"
			if clusterIP == "10.96.0.1" {
				syncWithin(t, p)
				if d := k.IPVS.Dump(); !strings.Contains(d, vs) {
					t.Fatalf("the IPv4 critical Service waits for ip6tables:\n%s", d)
				}
				release()
				return
			}
			// Longer than a sync waits for a busy glue (glue.aheadWait, 2 s).
			time.AfterFunc(2500*time.Millisecond, release)
			syncWithin(t, p)
			if d := k.IPVS.Dump(); !strings.Contains(d, vs) {
				t.Fatalf("the IPv6 critical Service was not programmed:\n%s", d)
			}
			if at, written := atIPv6Chains(); !written || strings.Contains(at, vs) {
				t.Fatalf("the IPv6 critical Service was programmed before its chains; IPVS then: %q", at)
			}
		})
	}
}

// TestIPv6CriticalServiceAfterAnIPv4OneWaitsForItsChains: the IPv4
// critical Service programmed while ip6tables runs does not let an IPv6
// one that comes next skip the wait for the IPv6 chains.
func TestIPv6CriticalServiceAfterAnIPv4OneWaitsForItsChains(t *testing.T) {
	p, k, release, atIPv6Chains := startHungIPv6(t, types.NamespacedName{Namespace: "default", Name: "kubernetes"},
		types.NamespacedName{Namespace: "kube-system", Name: "kube-dns"})

	feed := p.Critical()
	api := localOnly("kubernetes", "10.96.0.1")
	api.Namespace = "default"
	feed.OnServiceAdd(desired.ServiceOf(api))
	feed.OnServicesSynced()
	feed.OnEndpointSlicesSynced()
	syncWithin(t, p)
	if d := k.IPVS.Dump(); !strings.Contains(d, "-A 10.96.0.1:80/TCP") {
		t.Fatalf("the IPv4 critical Service waits for ip6tables:\n%s", d)
	}

	dns := localOnly("kube-dns", "fd00::10")
	dns.Namespace = "kube-system"
	feed.OnServiceAdd(desired.ServiceOf(dns))
	// Longer than a sync waits for a busy glue (glue.aheadWait, 2 s).
	time.AfterFunc(2500*time.Millisecond, release)
	syncWithin(t, p)
	if d := k.IPVS.Dump(); !strings.Contains(d, "-A [fd00::10]:80/TCP") {
		t.Fatalf("the IPv6 critical Service was not programmed:\n%s", d)
	}
	if at, written := atIPv6Chains(); !written || strings.Contains(at, "fd00::10") {
		t.Fatalf("the IPv6 critical Service was programmed before its chains; IPVS then: %q", at)
	}
}

// startHungIPv6 makes a dual-stack proxier with these critical Services
// and starts its early setup, whose ip6tables-restore hangs until release.
// atIPv6Chains says what IPVS held when the IPv6 chains were first
// written, if they were.
func startHungIPv6(t *testing.T, critical ...types.NamespacedName) (p *Proxier, k fakekernel.Kernel, release func(), atIPv6Chains func() (string, bool)) {
	k = fakekernel.Bare()
	ipt, ip6t := &iptables.Fake{}, &iptables.Fake{}
	p = New(Config{Desired: desired.Config{NodeName: "me", IPv6Capable: true}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour,
		CriticalServices: critical},
		Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: ipt, IP6Tables: ip6t}, zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
	hang := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(hang) }) }
	t.Cleanup(release)
	var mu sync.Mutex
	var first *string
	ip6t.SetHook(func(op string) error {
		if strings.HasPrefix(op, "restore") {
			<-hang
			mu.Lock()
			if first == nil {
				d := k.IPVS.Dump()
				first = &d
			}
			mu.Unlock()
		}
		return nil
	})
	steps := []chan error{make(chan error, 1), make(chan error, 1)}
	p.setup.early.steps = steps
	go p.setUpEarly(steps)
	return p, k, release, func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			return "", false
		}
		return *first, true
	}
}
