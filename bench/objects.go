package main

import (
	"fmt"
	"net/netip"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

const namespace = "bench"

// Addresses: Service i gets 10.96.1.0+i (clear of 10.96.0.1, the kubernetes
// Service); endpoint j of Service i gets 10.128.0.0 + i*E + j.
func serviceIP(i int) netip.Addr { return offset(netip.MustParseAddr("10.96.1.0"), i) }

func endpointIP(i, j, perService int) netip.Addr {
	return offset(netip.MustParseAddr("10.128.0.0"), i*perService+j)
}

func offset(base netip.Addr, n int) netip.Addr {
	b := base.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func serviceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

func benchSlice(i, perService int, extra ...netip.Addr) *discovery.EndpointSlice {
	var eps []discovery.Endpoint
	for j := 0; j < perService; j++ {
		ep := framework.Endpoint(endpointIP(i, j, perService).String(), "other-node", true)
		// As the EndpointSlice controller writes them: each endpoint names its Pod.
		pod := fmt.Sprintf("%s-%d", serviceName(i), j)
		ep.TargetRef = &v1.ObjectReference{Kind: "Pod", Namespace: namespace, Name: pod, UID: types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, j))}
		eps = append(eps, ep)
	}
	for _, a := range extra {
		eps = append(eps, framework.Endpoint(a.String(), "other-node", true))
	}
	return framework.Slice(namespace, serviceName(i), serviceName(i)+"-1",
		[]discovery.EndpointPort{framework.SlicePort("http", v1.ProtocolTCP, 8080)}, eps...)
}

// createFromHost creates the objects of the first scale from the host: in
// the emulated VM, client-go's TLS and encoding made creating 50k Services
// take 48 minutes. The VM's run then finds them and creates only what later
// scales add.
func createFromHost(n, perService int, mix string) error {
	env, err := framework.LoadHost()
	if err != nil {
		return err
	}
	start := time.Now()
	progress("[%d svc] creating API objects from the host", n)
	if err := ensureObjects(env, n, perService, mix, func(done int) {
		if done%10000 == 0 {
			progress("[%d svc] %d services created", n, done)
		}
	}); err != nil {
		return err
	}
	progress("[%d svc] objects created in %v", n, time.Since(start).Round(time.Second))
	return nil
}

// ensureObjects creates Services 0..n-1 of the mix with their slices (those
// that exist are kept), plus an endpoint for default/kubernetes so that it
// programs a real server as on a real cluster.
func ensureObjects(env *framework.Env, n, perService int, mix string, progress func(done int)) error {
	if err := env.CreateNamespace(namespace); err != nil {
		return err
	}
	kube := framework.Slice("default", "kubernetes", "kubernetes",
		[]discovery.EndpointPort{framework.SlicePort("https", v1.ProtocolTCP, 6443)},
		framework.Endpoint("10.0.2.100", "", true))
	if err := env.Apply(kube); err != nil {
		return err
	}
	have := map[string]bool{}
	for cont := ""; ; {
		ctx, cancel := framework.Ctx()
		page, err := env.Admin.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{Limit: 5000, Continue: cont})
		cancel()
		if err != nil {
			return err
		}
		for _, s := range page.Items {
			have[s.Name] = true
		}
		if cont = page.Continue; cont == "" {
			break
		}
	}
	var missing []int
	for i := 0; i < n; i++ {
		if !have[serviceName(i)] {
			missing = append(missing, i)
		}
	}
	var mu sync.Mutex
	done := len(have)
	return parallel(16, missing, func(i int) error {
		if err := env.Apply(benchService(i, mix), benchSlice(i, perService)); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if done++; done%500 == 0 {
			progress(done)
		}
		return nil
	})
}
