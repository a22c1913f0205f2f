package main

import (
	"net/netip"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// The dual-stack scenario (-mix dual): every Service is RequireDualStack,
// with an IPv4 ClusterIP as in the default mix and an IPv6 one, and has an
// IPv6 EndpointSlice beside its IPv4 one, with as many endpoints. Each
// proxier then programs every object twice, once per family: the IPv6
// virtual servers, VIPs and KUBE-6- set entries. The one-change, churn and
// restart scenarios change and watch the IPv4 half.
const mixDual = "dual"

// Service i's IPv6 ClusterIP is in testcluster's fd00:10:96::/112; endpoint
// j of Service i is fd00:10:128:: + i*E + j.
func serviceIPv6(i int) netip.Addr { return offset6(netip.MustParseAddr("fd00:10:96::100"), i) }

func endpointIPv6(i, j, perService int) netip.Addr {
	return offset6(netip.MustParseAddr("fd00:10:128::"), i*perService+j)
}

// offset6 adds n to the low 32 bits of an IPv6 address whose low 32 bits
// leave room for it.
func offset6(base netip.Addr, n int) netip.Addr {
	b := base.As16()
	v := uint32(b[12])<<24 | uint32(b[13])<<16 | uint32(b[14])<<8 | uint32(b[15]) + uint32(n)
	b[12], b[13], b[14], b[15] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	return netip.AddrFrom16(b)
}

// dualStack makes svc Service i's dual-stack form.
func dualStack(svc *v1.Service, i int) {
	svc.Spec.IPFamilyPolicy = ptr(v1.IPFamilyPolicyRequireDualStack)
	svc.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	svc.Spec.ClusterIPs = append(svc.Spec.ClusterIPs, serviceIPv6(i).String())
}

// benchSliceV6 is Service i's IPv6 EndpointSlice in the dual-stack mix: its
// IPv4 slice with each endpoint's address in IPv6.
func benchSliceV6(i, perService int) *discovery.EndpointSlice {
	sl := benchSlice(i, perService)
	sl.Name = serviceName(i) + "-v6"
	sl.AddressType = discovery.AddressTypeIPv6
	for j := range sl.Endpoints {
		sl.Endpoints[j].Addresses = []string{endpointIPv6(i, j, perService).String()}
	}
	return sl
}

// mixObjects are the API objects a mix adds to Service i and its IPv4
// slice.
func mixObjects(i, perService int, mix string) []any {
	if mix != mixDual {
		return nil
	}
	return []any{benchSliceV6(i, perService)}
}

// ensureMixObjects creates what the mix adds to Services 0..n-1 (those that
// exist are kept), after ensureObjects made the Services and their IPv4
// slices.
func ensureMixObjects(env *framework.Env, n, perService int, mix string) error {
	if len(mixObjects(0, perService, mix)) == 0 {
		return nil
	}
	have := map[string]bool{}
	for cont := ""; ; {
		ctx, cancel := framework.Ctx()
		page, err := env.Admin.DiscoveryV1().EndpointSlices(namespace).List(ctx, metav1.ListOptions{Limit: 5000, Continue: cont})
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
		if !have[serviceName(i)+"-v6"] {
			missing = append(missing, i)
		}
	}
	var mu sync.Mutex
	done := 0
	return parallel(16, missing, func(i int) error {
		if err := env.Apply(mixObjects(i, perService, mix)...); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if done++; done%1000 == 0 {
			progress("[%d svc] %d IPv6 slices created", n, done)
		}
		return nil
	})
}

// createMixFromHost creates the first scale's objects from the host, as
// createFromHost does, with what the mix adds.
func createMixFromHost(n, perService int, mix string) error {
	if err := createFromHost(n, perService, mix); err != nil {
		return err
	}
	env, err := framework.LoadHost()
	if err != nil {
		return err
	}
	return ensureMixObjects(env, n, perService, mix)
}
