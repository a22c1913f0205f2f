package informers

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
)

// FuzzSlim decodes any JSON as a Service, an EndpointSlice, a Node or a
// tombstone, as the apiserver might send it, and checks the informers'
// transform on it: no panic or error; a desired.Service or desired.Slice
// for those, else the same object back with the bookkeeping gone;
// everything the proxier reads (a Service's ports, addresses, policies,
// affinity, name, UID and scheduler annotation, the slice's Service name,
// ports and endpoints' addresses, conditions, node and hints) unchanged,
// or read as the API documents it; and a second pass a no-op.
func FuzzSlim(f *testing.F) {
	f.Add(uint8(0), []byte(`{"metadata":{"name":"web","namespace":"ns","managedFields":[{"manager":"kubectl"}],`+
		`"ownerReferences":[{"kind":"X","name":"y"}],"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","a":"b"}},`+
		`"spec":{"clusterIP":"010.096.000.010","ports":[{"port":80}]}}`))
	f.Add(uint8(0), []byte(`{"metadata":{"name":"lb","namespace":"ns","uid":"u","creationTimestamp":"2026-11-29T01:00:00Z",`+
		`"annotations":{"kube-ipvs-proxy.io/ipvs-scheduler":"lc"}},"spec":{"type":"LoadBalancer","clusterIP":"10.96.0.1","clusterIPs":["10.96.0.1","fd00::1"],`+
		`"ports":[{"name":"h","protocol":"UDP","port":53,"nodePort":30053}],"externalIPs":["192.0.2.1"],"loadBalancerSourceRanges":["192.0.2.0/24"],`+
		`"sessionAffinity":"ClientIP","sessionAffinityConfig":{"clientIP":{"timeoutSeconds":60}},"externalTrafficPolicy":"Local",`+
		`"internalTrafficPolicy":"Local","healthCheckNodePort":31000},"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.9","ipMode":"Proxy"},`+
		`{"hostname":"lb.example"},{"ip":"192.0.2.10","ipMode":""}]}}}`))
	f.Add(uint8(1), []byte(`{"metadata":{"name":"web-1","generateName":"web-","labels":{"kubernetes.io/service-name":"web","endpointslice.kubernetes.io/managed-by":"c"},`+
		`"annotations":{"endpoints.kubernetes.io/last-change-trigger-time":"2026-01-02T03:04:05Z","x":"y"}},"addressType":"IPv4",`+
		`"endpoints":[{"addresses":["10.244.0.1"],"nodeName":"n","targetRef":{"kind":"Pod","name":"p"},"deprecatedTopology":{"a":"b"},`+
		`"hints":{"forZones":[{"name":"z"}]},"conditions":{"ready":true,"serving":true,"terminating":false}},{},`+
		`{"addresses":["10.244.0.2"],"nodeName":"n","zone":"z","hostname":"h","conditions":{"ready":false}},{"nodeName":"m"}],"ports":[{"port":8080}]}`))
	f.Add(uint8(2), []byte(`{"metadata":{"name":"n","managedFields":[]},"spec":{"podCIDRs":["10.244.0.0/24"]},"status":{"addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}`))
	f.Add(uint8(3), []byte(`{"metadata":{"name":"gone"}}`))
	f.Fuzz(func(t *testing.T, kind uint8, data []byte) {
		var obj, before any
		switch kind % 4 {
		case 0:
			obj, before = &v1.Service{}, &v1.Service{}
		case 1:
			obj, before = &discovery.EndpointSlice{}, &discovery.EndpointSlice{}
		case 2:
			obj, before = &v1.Node{}, &v1.Node{}
		case 3:
			obj, before = &v1.Service{}, &v1.Service{}
		}
		if json.Unmarshal(data, obj) != nil || json.Unmarshal(data, before) != nil {
			return
		}
		in := obj
		if kind%4 == 3 {
			in = cache.DeletedFinalStateUnknown{Key: "ns/gone", Obj: obj}
		}
		out, err := Slim(in)
		if err != nil {
			t.Fatalf("Slim: %v", err)
		}
		if kind%4 == 3 {
			if !equality.Semantic.DeepEqual(out, in) {
				t.Fatalf("a tombstone changed: %+v", out)
			}
			return
		}
		switch b := before.(type) {
		case *discovery.EndpointSlice:
			read(t, b, out)
			return
		case *v1.Service:
			readService(t, b, out)
			return
		}
		if out != obj {
			t.Fatalf("Slim returned another object")
		}
		kept(t, before, obj)
		again, _ := json.Marshal(obj)
		if _, err := Slim(obj); err != nil {
			t.Fatal(err)
		}
		if twice, _ := json.Marshal(obj); string(twice) != string(again) {
			t.Fatalf("a second pass changed\n%s\nto\n%s", again, twice)
		}
	})
}

// kept checks that after is before without the bookkeeping Slim drops.
func kept(t *testing.T, before, after any) {
	t.Helper()
	same := equality.Semantic.DeepEqual
	switch b := before.(type) {
	case *v1.Node:
		a := after.(*v1.Node)
		if !same(a.Spec, b.Spec) || !same(a.Status, b.Status) || a.Name != b.Name || !same(a.Labels, b.Labels) ||
			!same(a.DeletionTimestamp, b.DeletionTimestamp) {
			t.Fatalf("node changed:\n%+v\n%+v", b, a)
		}
		bookkeeping(t, a.ManagedFields == nil, a.OwnerReferences == nil, a.Annotations[lastAppliedAnnotation] == "")
	}
}

// readService checks that out is b as the proxier reads it.
func readService(t *testing.T, b *v1.Service, out any) {
	t.Helper()
	a, ok := out.(*desired.Service)
	if !ok {
		t.Fatalf("a Service slimmed to a %T", out)
	}
	sp := &b.Spec
	var sticky *int32
	if c := sp.SessionAffinityConfig; c != nil && c.ClientIP != nil {
		sticky = c.ClientIP.TimeoutSeconds
	}
	scheduler, hasScheduler := b.Annotations[desired.SchedulerAnnotation]
	if a.Name != b.Name || a.Namespace != b.Namespace || a.ResourceVersion != b.ResourceVersion || a.UID != b.UID ||
		!a.Created.Equal(b.CreationTimestamp.Time) || a.Type != sp.Type || a.ClusterIP != sp.ClusterIP ||
		!slices.Equal(a.ClusterIPs, sp.ClusterIPs) || !slices.Equal(a.ExternalIPs, sp.ExternalIPs) ||
		!slices.Equal(a.LoadBalancerSourceRanges, sp.LoadBalancerSourceRanges) || a.SessionAffinity != sp.SessionAffinity ||
		(a.StickySeconds == nil) != (sticky == nil) || sticky != nil && *a.StickySeconds != *sticky ||
		a.ExternalTrafficPolicy != sp.ExternalTrafficPolicy || a.InternalTrafficPolicy != ptr.Deref(sp.InternalTrafficPolicy, "") ||
		a.HealthCheckNodePort != sp.HealthCheckNodePort || (a.Scheduler != nil) != hasScheduler ||
		hasScheduler && *a.Scheduler != scheduler || len(a.Ports) != len(sp.Ports) || len(a.Ingress) != len(b.Status.LoadBalancer.Ingress) {
		t.Fatalf("service read wrong:\n%+v\n%+v", b, a)
	}
	for i, p := range sp.Ports {
		want := desired.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort}
		if a.Ports[i] != want {
			t.Fatalf("port %d read as %+v, want %+v", i, a.Ports[i], want)
		}
	}
	for i, ing := range b.Status.LoadBalancer.Ingress {
		got := a.Ingress[i]
		if got.IP != ing.IP || (got.IPMode == nil) != (ing.IPMode == nil) || got.IPMode != nil && *got.IPMode != *ing.IPMode {
			t.Fatalf("ingress %d read as %+v, want %+v", i, got, ing)
		}
	}
	if again, err := Slim(a); err != nil || again != a {
		t.Fatalf("a second pass gave %v, %v", again, err)
	}
}

// read checks that out is b as the proxier reads it.
func read(t *testing.T, b *discovery.EndpointSlice, out any) {
	t.Helper()
	a, ok := out.(*desired.Slice)
	if !ok {
		t.Fatalf("a slice slimmed to a %T", out)
	}
	trigger, err := time.Parse(time.RFC3339Nano, b.Annotations[v1.EndpointsLastChangeTriggerTime])
	if err != nil {
		trigger = time.Time{}
	}
	if a.Name != b.Name || a.Namespace != b.Namespace || a.ResourceVersion != b.ResourceVersion ||
		a.Service != b.Labels[discovery.LabelServiceName] || a.AddressType != b.AddressType ||
		!a.TriggerTime.Equal(trigger) || len(a.Ports) != len(b.Ports) || len(a.Endpoints) != len(b.Endpoints) {
		t.Fatalf("slice read wrong:\n%+v\n%+v", b, a)
	}
	for i, p := range b.Ports {
		want := desired.SlicePort{Name: ptr.Deref(p.Name, ""), Protocol: ptr.Deref(p.Protocol, v1.ProtocolTCP), Port: ptr.Deref(p.Port, 0)}
		if a.Ports[i] != want {
			t.Fatalf("port %d read as %+v, want %+v", i, a.Ports[i], want)
		}
	}
	for i, e := range b.Endpoints {
		got := a.Endpoints[i]
		if len(e.Addresses) > 0 && got.Address != e.Addresses[0] || len(e.Addresses) == 0 && got.Address != "" ||
			got.NodeName != ptr.Deref(e.NodeName, "") || got.Ready != ptr.Deref(e.Conditions.Ready, true) ||
			got.Serving != ptr.Deref(e.Conditions.Serving, true) || got.Terminating != ptr.Deref(e.Conditions.Terminating, false) {
			t.Fatalf("endpoint %d read wrong:\n%+v\n%+v", i, e, got)
		}
		var zones, nodes []string
		if e.Hints != nil {
			for _, z := range e.Hints.ForZones {
				zones = append(zones, z.Name)
			}
			for _, n := range e.Hints.ForNodes {
				nodes = append(nodes, n.Name)
			}
		}
		if got.Hints == nil && (zones != nil || nodes != nil) ||
			got.Hints != nil && (!slices.Equal(got.Hints.Zones, zones) || !slices.Equal(got.Hints.Nodes, nodes) || zones == nil && nodes == nil) {
			t.Fatalf("endpoint %d hints read as %+v from %+v", i, got.Hints, e.Hints)
		}
	}
	if again, err := Slim(a); err != nil || again != a {
		t.Fatalf("a second pass gave %v, %v", again, err)
	}
}

func bookkeeping(t *testing.T, dropped ...bool) {
	t.Helper()
	for i, ok := range dropped {
		if !ok {
			t.Fatalf("bookkeeping field %d kept", i)
		}
	}
}
