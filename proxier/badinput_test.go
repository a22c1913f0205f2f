package proxier

import (
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
)

// A panic while computing one Service's state skips that Service, with
// one Error line carrying the stack and one Event, and the others are
// programmed. The panicking input is a nil EndpointSlice, which the
// tracker never holds but desiredState does not guard against.
func TestPanicOnOneServiceSkipsItAlone(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	p, k, _, ev := newLoggingProxier(t, zap.New(core), healthz.New(time.Minute))
	web := svc("10.96.0.10", port("http", v1.ProtocolTCP, 80))
	web.Name = "web"
	sl := slice("web-1", []discovery.EndpointPort{sport("http", v1.ProtocolTCP, 8080)}, ep{ip: "10.244.0.1"})
	sl.Labels[discovery.LabelServiceName] = "web"
	bad := svc("10.96.0.66", port("http", v1.ProtocolTCP, 80))
	bad.Name = "bad"
	for _, s := range []*v1.Service{web, bad} {
		p.OnServiceAdd(s)
	}
	p.OnEndpointSliceAdd(sl)
	p.changeTracker.slices[name("bad")] = map[string]*discovery.EndpointSlice{"x": nil}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("desiredState no longer panics on a nil slice: pick another panicking input for this test")
			}
		}()
		desiredState(bad, []*discovery.EndpointSlice{nil}, &p.cfg, nodeAddrs{})
	}()
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
	p.needFull = true
	p.OnServiceUpdate(bad, bad.DeepCopy()) // recomputed, same panic
	p.SyncNow()

	if dump := k.ipvs.Dump(); !strings.Contains(dump, "-A 10.96.0.10:80/TCP") || !strings.Contains(dump, "10.244.0.1:8080") ||
		strings.Contains(dump, "10.96.0.66") {
		t.Fatalf("want web programmed and bad not:\n%s", dump)
	}
	if len(*ev) != 1 || !strings.Contains((*ev)[0], "Warning InvalidService") || !strings.Contains((*ev)[0], "internal error") {
		t.Fatalf("events %q, want one naming the internal error", *ev)
	}
	panics := logs.FilterMessageSnippet("panic").All()
	if len(panics) != 1 || panics[0].Level != zapcore.ErrorLevel || !strings.Contains(panics[0].ContextMap()["stack"].(string), "desiredState") {
		t.Fatalf("want one Error line with the stack, got %+v", panics)
	}
}

func TestAffinityTimeoutOutOfRangeIsReportedAndDefaulted(t *testing.T) {
	cfg := &Config{NodeName: "me", Scheduler: "rr"}
	for timeout, want := range map[int32]uint32{-1: 10800, 0: 10800, 86401: 10800, -2147483648: 10800, 1: 1, 86400: 86400} {
		s := svc("10.96.0.20", port("", v1.ProtocolTCP, 80))
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To(timeout)}}
		st, problems := desiredState(s, nil, cfg, nodeAddrs{})
		if len(st.virtualServers) != 1 || st.virtualServers[0].vs.Timeout != want {
			t.Errorf("timeout %d programmed as\n%s\nwant timeout=%d", timeout, render(st), want)
		}
		if reported := len(problems) > 0; reported != (want != uint32(timeout)) {
			t.Errorf("timeout %d: problems %q", timeout, problems)
		}
	}
}

// As upstream, a /0 source range lets any source in: the load balancer
// gets no firewall entries, which the kernel would refuse anyway
// (hash:ip,port,net takes no /0 net).
func TestZeroSourceRangeAllowsAll(t *testing.T) {
	s := svc("10.96.0.30", port("", v1.ProtocolTCP, 80))
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	s.Spec.LoadBalancerSourceRanges = []string{"10.0.0.0/8", "0.0.0.0/0", "fd00::/64"}
	s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	st, problems := desiredState(s, nil, &Config{NodeName: "me", Scheduler: "rr"}, nodeAddrs{})
	if r := render(st); len(problems) > 0 || strings.Contains(r, "KUBE-LOAD-BALANCER-FW") || strings.Contains(r, "SOURCE") ||
		strings.Contains(r, "node blocked") || !strings.Contains(r, "KUBE-LOAD-BALANCER 198.51.100.7") {
		t.Fatalf("problems %q, state\n%s", problems, r)
	}
}

// Input the apiserver never passes but a hostile object may hold: a second
// cluster IP of one family, a second port of the same number and protocol.
// The first is programmed, the second reported.
func TestSecondsOfOneKindAreReported(t *testing.T) {
	s := svc("10.96.0.40", port("a", v1.ProtocolTCP, 80), port("b", v1.ProtocolTCP, 80), port("c", v1.ProtocolUDP, 80))
	s.Spec.ClusterIPs = []string{"10.96.0.40", "::ffff:10.96.0.41"}
	sl := slice("s-1", []discovery.EndpointPort{sport("a", v1.ProtocolTCP, 8080), sport("b", v1.ProtocolTCP, 9090)}, ep{ip: "10.244.0.1"})
	st, problems := desiredState(s, []*discovery.EndpointSlice{sl}, &Config{NodeName: "me", Scheduler: "rr"}, nodeAddrs{})
	r := render(st)
	if len(problems) != 2 || !strings.Contains(problems[0], "10.96.0.41") || !strings.Contains(problems[1], `port "b"`) {
		t.Errorf("problems %q", problems)
	}
	if strings.Contains(r, "10.96.0.41") || strings.Contains(r, ":9090") || !strings.Contains(r, "10.244.0.1:8080") || !strings.Contains(r, "80/UDP") {
		t.Errorf("state\n%s", r)
	}
}
