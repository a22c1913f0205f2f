package informers

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
)

// FuzzSlim decodes any JSON as a Service, an EndpointSlice, a Node or a
// tombstone, as the apiserver might send it, and checks the informers'
// transform on it: no panic or error; the same object back; the
// bookkeeping gone; everything the proxier reads (spec, status, name and
// UID, the scheduler annotation, the slice's Service name, ports and
// endpoints' addresses, conditions, node and hints) unchanged; and a
// second pass a no-op.
func FuzzSlim(f *testing.F) {
	f.Add(uint8(0), []byte(`{"metadata":{"name":"web","namespace":"ns","managedFields":[{"manager":"kubectl"}],`+
		`"ownerReferences":[{"kind":"X","name":"y"}],"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}","a":"b"}},`+
		`"spec":{"clusterIP":"010.096.000.010","ports":[{"port":80}]}}`))
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
	case *v1.Service:
		a := after.(*v1.Service)
		if !same(a.Spec, b.Spec) || !same(a.Status, b.Status) || a.Name != b.Name || a.Namespace != b.Namespace || a.UID != b.UID {
			t.Fatalf("service changed:\n%+v\n%+v", b, a)
		}
		if v, ok := b.Annotations[desired.SchedulerAnnotation]; ok && a.Annotations[desired.SchedulerAnnotation] != v {
			t.Fatalf("the scheduler annotation lost: %v", a.Annotations)
		}
		bookkeeping(t, a.ManagedFields == nil, a.OwnerReferences == nil, a.Labels == nil, len(a.Annotations) <= 1)
	case *discovery.EndpointSlice:
		a := after.(*discovery.EndpointSlice)
		if a.Name != b.Name || a.Namespace != b.Namespace || a.Labels[discovery.LabelServiceName] != b.Labels[discovery.LabelServiceName] ||
			len(a.Labels) > 1 || a.AddressType != b.AddressType ||
			!same(a.Ports, b.Ports) || len(a.Endpoints) != len(b.Endpoints) ||
			a.Annotations[v1.EndpointsLastChangeTriggerTime] != b.Annotations[v1.EndpointsLastChangeTriggerTime] {
			t.Fatalf("slice changed:\n%+v\n%+v", b, a)
		}
		for i, e := range b.Endpoints {
			e.TargetRef, e.DeprecatedTopology, e.Hostname, e.Zone = nil, nil, nil, nil
			if !same(a.Endpoints[i], e) {
				t.Fatalf("endpoint %d changed:\n%+v\n%+v", i, e, a.Endpoints[i])
			}
		}
		_, trigger := b.Annotations[v1.EndpointsLastChangeTriggerTime]
		if len(a.Annotations) > 1 || len(a.Annotations) == 1 && !trigger {
			t.Fatalf("slice kept annotations %v", a.Annotations)
		}
		bookkeeping(t, a.ManagedFields == nil, a.OwnerReferences == nil, true)
	case *v1.Node:
		a := after.(*v1.Node)
		if !same(a.Spec, b.Spec) || !same(a.Status, b.Status) || a.Name != b.Name || !same(a.Labels, b.Labels) ||
			!same(a.DeletionTimestamp, b.DeletionTimestamp) {
			t.Fatalf("node changed:\n%+v\n%+v", b, a)
		}
		bookkeeping(t, a.ManagedFields == nil, a.OwnerReferences == nil, a.Annotations[lastAppliedAnnotation] == "")
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
