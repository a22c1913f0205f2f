package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/informers"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeclient/clientset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// fakeModeName labels the records of the proxier measured alone.
const fakeModeName = "kube-ipvs-proxy (fake clientset)"

// measureFake runs our proxier inside this process on the real kernel, fed
// the same objects by a fake clientset: its cold start and one-change cost
// without the apiserver, the network and protobuf decoding.
func measureFake(k kernel, n int, o options) ([]record, error) {
	var objs []runtime.Object
	objs = append(objs,
		framework.ClusterIPService("default", "kubernetes", kubeVIP.String(), framework.Port("https", v1.ProtocolTCP, 443, 6443)),
		framework.Slice("default", "kubernetes", "kubernetes",
			[]discovery.EndpointPort{framework.SlicePort("https", v1.ProtocolTCP, 6443)},
			framework.Endpoint(kubeReal.Addr().String(), "", true)))
	for i := 0; i < n; i++ {
		objs = append(objs, benchService(i, o.mix), benchSlice(i, o.perService))
		for _, extra := range mixObjects(i, o.perService, o.mix) {
			objs = append(objs, extra.(runtime.Object))
		}
	}
	// The simple clientset: the field-managed one costs seconds per
	// thousand objects to build, which is not what this mode measures.
	client := fake.NewSimpleClientset(objs...) //nolint:staticcheck

	_, v6 := os.Stat("/proc/net/if_inet6")
	kern, err := proxier.NewKernel(v6 == nil)
	if err != nil {
		return nil, err
	}
	cfg := proxier.Config{Desired: desired.Config{NodeName: framework.NodeName, IPv6Capable: v6 == nil},
		SyncPeriod: 30 * time.Second, MinSyncPeriod: time.Second, Glue: glue.Config{MasqueradeBit: 14}, CriticalServices: []types.NamespacedName{{Namespace: "default", Name: "kubernetes"}}}
	m := metrics.New()
	// The scenarios read the metrics where a proxier serves them.
	ln, err := net.Listen("tcp", "127.0.0.1:10249")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: m.Handler(nil), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &session{client: client, k: k, name: fakeModeName, n: n, o: o, cap: 30 * time.Minute}
	s.logf("cold start")
	start := time.Now()
	p := proxier.New(cfg, kern, zap.NewNop(), healthz.New(time.Minute), m, nil)
	if err := informers.Start(ctx, clientset.Client{Interface: client}, cfg.Desired.NodeName, 15*time.Minute, p, p, p, nil); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	cold := s.record("cold-start")
	cold.Samples = ptr(1)
	before := s.usage()
	check := completion{k: k, n: n, perService: o.perService, mix: o.mix}
	for {
		since := time.Since(start)
		if cold.KubernetesReadyMs == nil && k.kubernetesReady() {
			cold.KubernetesReadyMs = ptr(ms(since))
		}
		if cold.KubernetesReadyMs != nil {
			if ok, at := check.poll(start); ok {
				cold.P50ms, cold.P99ms, cold.KernelObjectsOK = ptr(ms(at)), ptr(ms(at)), ptr(true)
				break
			}
		}
		if since > 30*time.Minute {
			return []record{cold}, errors.New("fake clientset mode: not complete after 30m")
		}
		time.Sleep(20 * time.Millisecond)
	}
	after := s.usage()
	cold.CPUs = ptr((after.CPU - before.CPU).Seconds())
	cold.Note = "in-process, objects from a fake clientset (no apiserver); CPU is the bench process's"
	s.logf("complete after %s", time.Duration(*cold.P99ms*float64(time.Millisecond)).Round(time.Millisecond))
	if !o.wants("one-change") {
		return []record{cold}, nil
	}
	s.logf("one change x%d", o.changes)
	one, err := s.oneChange()
	if err != nil {
		return nil, fmt.Errorf("fake clientset mode: %w", err)
	}
	return append([]record{cold}, one...), nil
}
