package proxier

import (
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler"
)

// claimant is a Service of its own namespace, name, age and UID, with one
// TCP port and one endpoint.
func claimant(ns, name, clusterIP string, created time.Time, uid string, backend string) (*v1.Service, *discovery.EndpointSlice) {
	s := testobj.Service(clusterIP, testobj.Port("https", v1.ProtocolTCP, 443))
	s.Namespace, s.Name, s.UID = ns, name, types.UID(uid)
	s.CreationTimestamp = metav1.NewTime(created)
	sl := testobj.Slice(name+"-1", []discovery.EndpointPort{testobj.SlicePort("https", v1.ProtocolTCP, 6443)}, testobj.EP{IP: backend})
	sl.Namespace, sl.Labels[discovery.LabelServiceName] = ns, name
	return s, sl
}

func syncedProxier(t *testing.T) (*Proxier, fakekernel.Kernel, *recordedEvents) {
	p, k, _, ev := newTestProxier(t)
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	return p, k, ev
}

var epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// The review's attack: a Service in a namespace that sorts first names
// default/kubernetes' cluster IP as its external IP. The cluster IP keeps
// its virtual server and real server, whichever came first and however
// the names sort; the attacker is told, and counted.
func TestExternalIPNeverTakesAnotherServicesClusterIP(t *testing.T) {
	for _, attackerFirst := range []bool{false, true} {
		p, k, ev := syncedProxier(t)
		kube, kubeEPs := claimant("default", "kubernetes", "10.96.0.1", epoch.Add(time.Hour), "b", "192.168.0.10")
		evil, evilEPs := claimant("aaa", "evil", "10.96.0.99", epoch, "a", "10.244.0.66")
		evil.Spec.ExternalIPs = []string{"10.96.0.1"}
		// Source ranges that leave everything out would firewall the
		// VIP:port for everyone, were the attacker's entries written.
		evil.Spec.Type = v1.ServiceTypeLoadBalancer
		evil.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/32"}
		evil.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.96.0.1"}}
		add := func(s *v1.Service, sl *discovery.EndpointSlice) {
			addService(p, s, sl)
			p.SyncNow()
		}
		if attackerFirst {
			add(evil, evilEPs)
			add(kube, kubeEPs)
		} else {
			add(kube, kubeEPs)
			add(evil, evilEPs)
		}
		dump := k.IPVS.Dump()
		if !strings.Contains(dump, "-a 10.96.0.1:443/TCP -r 192.168.0.10:6443 -w 1") || strings.Contains(dump, "-a 10.96.0.1:443/TCP -r 10.244.0.66:6443 -w 1") {
			t.Fatalf("attacker first=%v: the cluster IP's virtual server was taken:\n%s", attackerFirst, dump)
		}
		for _, set := range []string{desired.SetExternalIP, desired.SetLoadBalancer, desired.SetLoadBalancerFW, desired.SetLoadBalancerSourceNet} {
			if entries, _ := k.Sets.Entries(set); len(entries) != 0 {
				t.Errorf("attacker first=%v: the loser's %s entries were written: %v", attackerFirst, set, entries)
			}
		}
		if got := gaugeValue(t, p.metrics.ConflictingClaims); got != 1 {
			t.Errorf("conflicting claims gauge = %v, want 1", got)
		}
		warned := 0
		for _, e := range *ev {
			if strings.HasPrefix(e, "Warning") && strings.Contains(e, "default/kubernetes") {
				warned++
			}
		}
		if warned != 1 {
			t.Errorf("attacker first=%v: want one Warning naming the winner, got %q", attackerFirst, *ev)
		}

		// The attacker's own cluster IP is programmed as usual.
		if !strings.Contains(dump, "-a 10.96.0.99:443/TCP -r 10.244.0.66:6443") {
			t.Errorf("the loser's other virtual servers were not programmed:\n%s", dump)
		}
	}
}

// Between two external IPs the older Service wins, whatever the names;
// when it goes, the other takes over, with its entries.
func TestOlderExternalIPClaimWinsAndTheNextTakesOver(t *testing.T) {
	p, k, _ := syncedProxier(t)
	old, oldEPs := claimant("zzz", "old", "10.96.0.2", epoch, "z", "10.244.0.2")
	young, youngEPs := claimant("aaa", "young", "10.96.0.3", epoch.Add(time.Minute), "a", "10.244.0.3")
	for _, s := range []*v1.Service{old, young} {
		s.Spec.ExternalIPs = []string{"203.0.113.7"}
	}
	p.OnServiceAdd(desired.ServiceOf(young))
	p.OnEndpointSliceAdd(desired.SliceOf(youngEPs))
	p.SyncNow()
	p.OnServiceAdd(desired.ServiceOf(old))
	p.OnEndpointSliceAdd(desired.SliceOf(oldEPs))
	p.SyncNow()
	dump := k.IPVS.Dump()
	if !strings.Contains(dump, "-a 203.0.113.7:443/TCP -r 10.244.0.2:6443 -w 1") || strings.Contains(dump, "-a 203.0.113.7:443/TCP -r 10.244.0.3:6443 -w 1") {
		t.Fatalf("the older Service does not hold the external IP:\n%s", dump)
	}

	p.OnServiceDelete(desired.ServiceOf(old))
	p.OnEndpointSliceDelete(desired.SliceOf(oldEPs))
	p.SyncNow()
	dump = k.IPVS.Dump()
	if !strings.Contains(dump, "-a 203.0.113.7:443/TCP -r 10.244.0.3:6443 -w 1") {
		t.Fatalf("the younger Service did not take over:\n%s", dump)
	}
	if entries, _ := k.Sets.Entries(desired.SetExternalIP); len(entries) != 1 {
		t.Errorf("external IP entries after the takeover: %v", entries)
	}
	if got := gaugeValue(t, p.metrics.ConflictingClaims); got != 0 {
		t.Errorf("conflicting claims gauge = %v, want 0", got)
	}
}

func TestClaimOrder(t *testing.T) {
	c := func(ns string, kind desired.Via, age time.Duration, uid string) claim {
		return claim{service: types.NamespacedName{Namespace: ns, Name: "s"}, kind: kind, created: epoch.Add(-age), uid: types.UID(uid)}
	}
	cases := []struct {
		name       string
		win, loses claim
	}{
		{"cluster IP over an older external IP", c("zz", desired.ViaClusterIP, 0, "b"), c("aa", desired.ViaExternalIP, time.Hour, "a")},
		{"node port over an older ingress IP", c("zz", desired.ViaNodePort, 0, "b"), c("aa", desired.ViaLoadBalancer, time.Hour, "a")},
		{"kube-system's external IP over an older tenant's", c("kube-system", desired.ViaExternalIP, 0, "b"), c("aa", desired.ViaExternalIP, time.Hour, "a")},
		{"default's ingress IP over an older tenant's external IP", c("default", desired.ViaLoadBalancer, 0, "b"), c("aa", desired.ViaExternalIP, time.Hour, "a")},
		{"a tenant's cluster IP over kube-system's external IP", c("zz", desired.ViaClusterIP, 0, "b"), c("kube-system", desired.ViaExternalIP, time.Hour, "a")},
		{"the older of two external IPs", c("zz", desired.ViaExternalIP, time.Hour, "b"), c("aa", desired.ViaExternalIP, 0, "a")},
		{"the lower UID at the same age", c("zz", desired.ViaExternalIP, 0, "a"), c("aa", desired.ViaExternalIP, 0, "b")},
		{"an ingress IP over an older external IP", c("zz", desired.ViaLoadBalancer, 0, "b"), c("aa", desired.ViaExternalIP, time.Hour, "a")},
		{"kube-system's external IP over a tenant's ingress IP", c("kube-system", desired.ViaExternalIP, 0, "b"), c("aa", desired.ViaLoadBalancer, time.Hour, "a")},
	}
	for _, tc := range cases {
		if !tc.win.beats(tc.loses) || tc.loses.beats(tc.win) {
			t.Errorf("%s: wrong order", tc.name)
		}
	}
}

func gaugeValue(t *testing.T, g interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}

// An address that is a Service's cluster IP is that Service's on every
// port: another Service's external IP on it gets no port there, not even
// one the cluster IP does not serve; once the cluster IP is gone it does.
func TestExternalIPOnAnotherClusterIPGetsNoPort(t *testing.T) {
	p, k, ev := syncedProxier(t)
	dns, dnsEPs := claimant("kube-system", "kube-dns", "10.96.0.10", epoch.Add(time.Hour), "b", "10.244.0.53")
	tls, tlsEPs := claimant("aaa", "dot", "10.96.0.77", epoch, "a", "10.244.0.66")
	tls.Spec.Ports[0].Port = 853
	tls.Spec.ExternalIPs = []string{"10.96.0.10"}
	addService(p, dns, dnsEPs)
	addService(p, tls, tlsEPs)
	p.SyncNow()
	if d := k.IPVS.Dump(); strings.Contains(d, "10.96.0.10:853") {
		t.Fatalf("a port was added to kube-dns' cluster IP:\n%s", d)
	}
	if got := gaugeValue(t, p.metrics.ConflictingClaims); got != 1 {
		t.Errorf("conflicting claims gauge = %v, want 1", got)
	}
	if !slices.ContainsFunc(*ev, func(e string) bool { return strings.Contains(e, "kube-system/kube-dns") }) {
		t.Errorf("no Warning names the cluster IP's Service: %q", *ev)
	}

	p.OnServiceDelete(desired.ServiceOf(dns))
	p.OnEndpointSliceDelete(desired.SliceOf(dnsEPs))
	p.SyncNow()
	if d := k.IPVS.Dump(); !strings.Contains(d, "-a 10.96.0.10:853/TCP -r 10.244.0.66:6443 -w 1") {
		t.Fatalf("the external IP did not get its port once the cluster IP was gone:\n%s", d)
	}
	if got := gaugeValue(t, p.metrics.ConflictingClaims); got != 0 {
		t.Errorf("conflicting claims gauge = %v, want 0", got)
	}
}

// A Service recomputed because it lost or won a virtual server can hand
// another on in turn (here it was deleted meanwhile, as an informer event
// between the tracker's take and peek would have it): the Service next in
// line is recomputed in the same sync, however long the chain.
func TestHandOverFollowsTheChain(t *testing.T) {
	p, _, _ := syncedProxier(t)
	b, bEPs := claimant("bbb", "b", "10.96.0.2", epoch, "b", "10.244.0.2")
	c, cEPs := claimant("ccc", "c", "10.96.0.3", epoch.Add(time.Hour), "c", "10.244.0.3")
	b.Spec.ExternalIPs = []string{"203.0.113.1", "203.0.113.2"}
	c.Spec.ExternalIPs = []string{"203.0.113.1"}
	addService(p, b, bEPs)
	addService(p, c, cEPs)
	p.SyncNow()

	// a, older than b, takes b's second external IP; b, recomputed, is
	// found deleted; c must get 203.0.113.1 back.
	a, aEPs := claimant("aaa", "a", "10.96.0.1", epoch.Add(-time.Hour), "a", "10.244.0.1")
	a.Spec.ExternalIPs = []string{"203.0.113.2"}
	bName := types.NamespacedName{Namespace: "bbb", Name: "b"}
	more := func(names []types.NamespacedName) []serviceInput {
		var out []serviceInput
		for _, n := range names {
			if n == bName {
				out = append(out, serviceInput{name: n}) // deleted meanwhile
			} else {
				out = append(out, p.changeTracker.peek([]types.NamespacedName{n})...)
			}
		}
		return out
	}
	changes := p.changes([]serviceInput{{name: types.NamespacedName{Namespace: "aaa", Name: "a"}, service: desired.ServiceOf(a), slices: []*desired.Slice{desired.SliceOf(aEPs)}}}, more)
	cName := types.NamespacedName{Namespace: "ccc", Name: "c"}
	i := slices.IndexFunc(changes, func(ch reconciler.Change) bool { return ch.Name == cName })
	if i < 0 {
		var names []string
		for _, ch := range changes {
			names = append(names, ch.Name.String())
		}
		t.Fatalf("c was not recomputed: changes for %v", names)
	}
	if !slices.ContainsFunc(changes[i].State.VirtualServers, func(v desired.VirtualServer) bool {
		return v.Virtual.Key.Address.String() == "203.0.113.1"
	}) {
		t.Errorf("c did not get 203.0.113.1 back: %+v", changes[i].State.VirtualServers)
	}
}

// addService hands the proxier a Service and its slice, as the informers do.
func addService(p *Proxier, s *v1.Service, sl *discovery.EndpointSlice) {
	p.OnServiceAdd(desired.ServiceOf(s))
	p.OnEndpointSliceAdd(desired.SliceOf(sl))
}
