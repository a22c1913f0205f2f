package proxier

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

// renderInput prints what the proxier computes from in: the Service's
// cluster IP and its slices' names and addresses, in order.
func renderInput(in serviceInput) string {
	var b strings.Builder
	if in.service != nil {
		b.WriteString(in.service.ClusterIP)
	} else {
		b.WriteString("-")
	}
	for _, s := range in.slices {
		fmt.Fprintf(&b, " %s=%s", s.Name, s.Endpoints[0].Address)
	}
	return b.String()
}

// FuzzChangeTracker plays any sequence of the informers' Service and
// EndpointSlice events (adds, updates that change something or nothing,
// slices moving between Services, deletes) with syncs taking the changes
// in between. No change may be lost: at the end every Service's input as
// last taken equals its input from the final objects, and a tracker fed
// just the final objects gives the same inputs.
func FuzzChangeTracker(f *testing.F) {
	f.Add([]byte{0, 0, 1, 1, 2, 0, 3, 1, 0, 2, 4, 0, 2, 1, 1, 5, 3, 1, 2})
	f.Add([]byte{1, 0, 0, 1, 1, 1, 0, 1, 3, 3, 1, 2, 3, 4, 5, 6, 7, 2, 2, 0, 1, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		names := []string{"a", "b", "c"}
		tr := newChangeTracker(nil)
		services := map[string]*desired.Service{}
		sl := map[string]*desired.Slice{} // by slice name
		seen := map[types.NamespacedName]string{}
		newService := func(n string, v int) *desired.Service {
			s := testobj.Service(fmt.Sprintf("10.96.0.%d", v), testobj.Port("", v1.ProtocolTCP, 80))
			s.Name = n
			return desired.ServiceOf(s)
		}
		newSlice := func(n, owner string, v int) *desired.Slice {
			s := testobj.Slice(n, []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, testobj.EP{IP: fmt.Sprintf("10.244.0.%d", v)})
			s.Labels[discovery.LabelServiceName] = owner
			return desired.SliceOf(s)
		}
		take := func(all bool) {
			for _, in := range tr.take(all) {
				seen[in.name] = renderInput(in)
			}
		}
		b := testobj.FuzzBytes(ops)
		for len(b) > 0 {
			n, v := names[b.Next()%len(names)], b.Next()%4
			switch b.Next() % 6 {
			case 0: // a Service added or updated
				cur := newService(n, v)
				if old := services[n]; old != nil {
					tr.OnServiceUpdate(old, cur)
				} else {
					tr.OnServiceAdd(cur)
				}
				services[n] = cur
			case 1:
				if old := services[n]; old != nil {
					tr.OnServiceDelete(old)
					delete(services, n)
				}
			case 2, 3: // a slice added or updated, perhaps moved to another Service
				sn := fmt.Sprintf("%s-%d", n, b.Next()%2)
				owner := names[b.Next()%len(names)]
				cur := newSlice(sn, owner, v)
				if old := sl[sn]; old != nil {
					tr.OnEndpointSliceUpdate(old, cur)
				} else {
					tr.OnEndpointSliceAdd(cur)
				}
				sl[sn] = cur
			case 4:
				sn := fmt.Sprintf("%s-%d", n, b.Next()%2)
				if old := sl[sn]; old != nil {
					tr.OnEndpointSliceDelete(old)
					delete(sl, sn)
				}
			case 5:
				take(b.Next()%4 == 0)
			}
		}
		take(false)

		fresh := newChangeTracker(nil)
		for _, s := range services {
			fresh.OnServiceAdd(s)
		}
		for _, s := range sl {
			fresh.OnEndpointSliceAdd(s)
		}
		for _, n := range names {
			name := types.NamespacedName{Namespace: "ns", Name: n}
			want := serviceInput{name: name, service: services[n]}
			for _, s := range sl {
				if s.Service == n {
					want.slices = append(want.slices, s)
				}
			}
			slices.SortFunc(want.slices, func(a, b *desired.Slice) int { return strings.Compare(a.Name, b.Name) })
			w := renderInput(want)
			if got, ok := seen[name]; (ok || w != "-") && got != w {
				t.Fatalf("%s: last taken as %q, now %q: a change was lost", n, got, w)
			}
			if got := renderInput(fresh.input(name)); got != w {
				t.Fatalf("%s: fed the final objects, the tracker gives %q, want %q", n, got, w)
			}
		}
	})
}
