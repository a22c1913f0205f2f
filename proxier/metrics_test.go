package proxier

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
)

// TestMetricsCarryTheIPFamily: the sync metrics carry upstream's ip_family,
// for each family the proxier runs: both on a dual-stack node, IPv4 alone
// on a node without IPv6. As in upstream's proxier of each family, a
// dual-stack Service counts in both, a slice's change in its own family,
// and an ip6tables failure in IPv6.
func TestMetricsCarryTheIPFamily(t *testing.T) {
	for _, dual := range []bool{false, true} {
		t.Run(fmt.Sprintf("dual-stack=%v", dual), func(t *testing.T) {
			k := fakekernel.Bare()
			ipt, ip6t := &iptables.Fake{}, &iptables.Fake{}
			kern := Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: ipt}
			if dual {
				kern.IP6Tables = ip6t
			}
			p := New(Config{Desired: desired.Config{NodeName: "me", IPv6Capable: dual}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour},
				kern, zap.NewNop(), healthz.New(time.Minute), metrics.New(), &recordedEvents{})
			both := localOnly("s", "10.96.0.10", "fd00::10")
			v4 := localOnly("v4", "10.96.0.11")
			p.OnServiceAdd(desired.ServiceOf(both))
			p.OnServiceAdd(desired.ServiceOf(v4))
			p.OnEndpointSliceAdd(desired.SliceOf(remoteSlice("s", "10.244.0.2")))
			p.OnEndpointSliceAdd(desired.SliceOf(remoteSlice("s", "fd00::244:2")))
			p.OnEndpointSliceAdd(desired.SliceOf(remoteSlice("v4", "10.244.0.3")))
			p.OnServicesSynced()
			p.OnEndpointSlicesSynced()
			p.SyncNow()
			if dual {
				ip6t.SetHook(oplog.FailWith(errors.New("ip6tables-restore: injected"), "save", "restore"))
			}
			p.drift.needFull = true
			p.SyncNow()

			got := gatherSeries(t, p.metrics)
			want := map[string]float64{
				`kubeproxy_sync_proxy_rules_duration_seconds{ip_family="IPv4"}`:                                   2,
				`kubeproxy_sync_full_proxy_rules_duration_seconds{ip_family="IPv4"}`:                              2,
				`kubeproxy_sync_partial_proxy_rules_duration_seconds{ip_family="IPv4"}`:                           0,
				`kubeproxy_network_programming_duration_seconds{ip_family="IPv4"}`:                                2,
				`kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="internal"}`: 2,
				`kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="external"}`: 0,
				`kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"}`:                    0,
				`kubeproxy_conntrack_reconciler_deleted_entries_total{ip_family="IPv4"}`:                          0,
			}
			if dual {
				want[`kubeproxy_sync_proxy_rules_duration_seconds{ip_family="IPv6"}`] = 2
				want[`kubeproxy_sync_full_proxy_rules_duration_seconds{ip_family="IPv6"}`] = 2
				want[`kubeproxy_network_programming_duration_seconds{ip_family="IPv6"}`] = 1
				want[`kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv6",traffic_policy="internal"}`] = 1
				want[`kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv6"}`] = 1
			}
			for series, v := range want {
				if g, ok := got[series]; !ok || g != v {
					t.Errorf("%s = %v (found: %v), want %v", series, g, ok, v)
				}
			}
			for _, name := range []string{"kubeproxy_sync_proxy_rules_last_timestamp_seconds", "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"} {
				if got[name+`{ip_family="IPv4"}`] == 0 || dual && got[name+`{ip_family="IPv6"}`] == 0 {
					t.Errorf("%s not set for each family", name)
				}
			}
			for series := range got {
				if !dual && strings.Contains(series, "IPv6") {
					t.Errorf("%s on a node without IPv6", series)
				}
			}
		})
	}
}

// localOnly is a Service with internalTrafficPolicy Local on clusterIPs.
func localOnly(name string, clusterIPs ...string) *v1.Service {
	svc := testobj.Service(clusterIPs[0], testobj.Port("", v1.ProtocolTCP, 80))
	svc.Name, svc.Spec.ClusterIPs = name, clusterIPs
	svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	return svc
}

// remoteSlice is a slice of Service name with one endpoint on another node,
// stamped with the time of its change.
func remoteSlice(name, ip string) *discovery.EndpointSlice {
	s := testobj.Slice(name+"-"+ip, []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)},
		testobj.EP{IP: ip, Ready: testobj.Yes, Node: "other"})
	s.Labels[discovery.LabelServiceName] = name
	if strings.Contains(ip, ":") {
		s.AddressType = discovery.AddressTypeIPv6
	}
	s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: time.Now().Add(-time.Second).Format(time.RFC3339Nano)}
	return s
}

// gatherSeries reads every series as name{labels}: a histogram's sample
// count, a counter's or gauge's value.
func gatherSeries(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case s.Histogram != nil:
				out[name] = float64(s.GetHistogram().GetSampleCount())
			case s.Counter != nil:
				out[name] = s.GetCounter().GetValue()
			case s.Gauge != nil:
				out[name] = s.GetGauge().GetValue()
			}
		}
	}
	return out
}
