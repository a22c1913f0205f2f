package proxier

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

// legacyService is a LoadBalancer Service and its slice with every address
// written as form says: "canonical", or "legacy" with IPv4 leading zeros
// (kube-apiserver accepts them unless StrictIPCIDRValidation is on).
func legacyService(form string) (*v1.Service, *discovery.EndpointSlice) {
	ip := map[string]map[string]string{
		"canonical": {"cluster": "10.96.0.10", "external": "203.0.113.7", "ingress": "198.51.100.7",
			"range": "10.0.0.0/8", "range2": " 192.168.1.0/24 ", "endpoint": "10.244.0.1"},
		"legacy": {"cluster": "010.096.000.010", "external": "203.000.113.007", "ingress": "198.051.100.007",
			"range": "010.000.000.000/08", "range2": " 192.168.001.000/24 ", "endpoint": "010.244.000.001"},
	}[form]
	s := testobj.Service(ip["cluster"], testobj.Port("http", v1.ProtocolTCP, 80))
	s.Name = "web"
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	s.Spec.ClusterIPs = []string{ip["cluster"]}
	s.Spec.ExternalIPs = []string{ip["external"]}
	s.Spec.LoadBalancerSourceRanges = []string{ip["range"], ip["range2"]}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip["ingress"]}}
	sl := testobj.Slice("web-1", []discovery.EndpointPort{testobj.SlicePort("http", v1.ProtocolTCP, 8080)}, testobj.EP{IP: ip["endpoint"], Ready: testobj.Yes})
	sl.Labels[discovery.LabelServiceName] = "web"
	return s, sl
}

// A Service whose addresses have IPv4 leading zeros is programmed as if
// they had none, read in decimal as upstream reads them: the same virtual
// servers, real servers, bound addresses, set entries and iptables rules.
func TestLegacyAddressesProgramLikeCanonicalOnes(t *testing.T) {
	dumps := map[string]string{}
	for _, form := range []string{"canonical", "legacy"} {
		p, k, ipt, ev := newTestProxier(t)
		s, sl := legacyService(form)
		p.OnServiceAdd(desired.ServiceOf(s))
		p.OnEndpointSliceAdd(desired.SliceOf(sl))
		p.OnServicesSynced()
		p.OnEndpointSlicesSynced()
		p.SyncNow()
		if len(*ev) != 0 {
			t.Errorf("%s: events %q, want none", form, *ev)
		}
		saved, _ := ipt.Save()
		dumps[form] = strings.Join([]string{k.IPVS.Dump(), k.Links.Dump(), k.Sets.Dump(), string(saved)}, "\n---\n")
	}
	for _, want := range []string{"-A 10.96.0.10:80/TCP", "-a 10.96.0.10:80/TCP -r 10.244.0.1:8080",
		"-A 203.0.113.7:80/TCP", "-A 198.51.100.7:80/TCP", "198.51.100.7,tcp:80,10.0.0.0/8", "198.51.100.7,tcp:80,192.168.1.0/24"} {
		if !strings.Contains(dumps["canonical"], want) {
			t.Fatalf("canonical form: %q missing from\n%s", want, dumps["canonical"])
		}
	}
	if dumps["legacy"] != dumps["canonical"] {
		t.Fatalf("legacy form programs\n%s\nwant, as the canonical form,\n%s", dumps["legacy"], dumps["canonical"])
	}
}
