//go:build e2e

package node

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

const ns = "node-e2e"

// outsideIP is a client outside the node and the pod network: a namespace
// routed through the node's root namespace, as a host of the LAN.
var outsideIP = netip.MustParseAddr("192.168.50.2")

// service is the Service of that name in the test namespace.
func service(t *testing.T, name string) *v1.Service {
	t.Helper()
	ctx, cancel := framework.Ctx()
	defer cancel()
	s, err := env.Admin.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// clusterIP is a Service's ClusterIP and first port.
func clusterIP(t *testing.T, name string) netip.AddrPort {
	s := service(t, name)
	return netip.AddrPortFrom(netip.MustParseAddr(s.Spec.ClusterIP), uint16(s.Spec.Ports[0].Port))
}

// nodePort is a Service's first NodePort on the node's address.
func nodePort(t *testing.T, name string) netip.AddrPort {
	s := service(t, name)
	return netip.AddrPortFrom(netip.MustParseAddr(framework.NodeIP), uint16(s.Spec.Ports[0].NodePort))
}

// clientPod is the client pod's network namespace.
func clientPod(t *testing.T) *framework.Pod {
	t.Helper()
	ctx, cancel := framework.Ctx()
	defer cancel()
	p, err := env.Admin.CoreV1().Pods(ns).Get(ctx, "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := framework.PodAt("client", netip.MustParseAddr(p.Status.PodIP))
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// echoPods are the names of the echo Deployment's ready pods.
func echoPods(t *testing.T) []string {
	t.Helper()
	ctx, cancel := framework.Ctx()
	defer cancel()
	pods, err := env.Admin.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// answers waits until send gets an answer (the proxier may still be
// programming what the workloads' start changed), then sends n requests and
// returns the distinct answers.
func answers(t *testing.T, n int, send func() (string, error)) []string {
	t.Helper()
	waitAnswer(t, send)
	var got []string
	for range n {
		a, err := send()
		if err != nil {
			t.Fatalf("request %d: %v", len(got)+1, err)
		}
		if !slices.Contains(got, a) {
			got = append(got, a)
		}
	}
	slices.Sort(got)
	return got
}

// TestServices: pods reach Services through the deployed proxier, by
// ClusterIP and by DNS name, a client outside the node reaches a NodePort,
// externalTrafficPolicy: Local keeps the client's address, and session
// affinity holds a client to one pod.
func TestServices(t *testing.T) {
	client := clientPod(t)
	pods := echoPods(t)
	if len(pods) != 3 {
		t.Fatalf("echo pods %v, want 3", pods)
	}
	outside, err := framework.StartPod(env, "outside", outsideIP, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(outside.Delete)
	const timeout = 5 * time.Second

	everyPod := func(t *testing.T, from *framework.Pod, to netip.AddrPort) {
		if got := answers(t, 30, func() (string, error) { return from.HTTP(to, timeout) }); !slices.Equal(got, pods) {
			t.Errorf("answers from %s: %v, want every pod %v", to, got, pods)
		}
	}
	t.Run("ClusterIPByIP", func(t *testing.T) { everyPod(t, client, clusterIP(t, "echo")) })
	t.Run("ClusterIPByName", func(t *testing.T) {
		to := clusterIP(t, "echo")
		waitAnswer(t, func() (string, error) {
			_, err := client.Resolve("kubernetes.default.svc.cluster.local", timeout)
			return "", err
		})
		addrs, err := client.Resolve("echo.node-e2e.svc.cluster.local", timeout)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(addrs, []string{to.Addr().String()}) {
			t.Fatalf("echo.node-e2e.svc.cluster.local is %v, want %s", addrs, to.Addr())
		}
		if got, err := client.HTTP(to, timeout); err != nil || !slices.Contains(pods, got) {
			t.Errorf("request by name: %q, %v", got, err)
		}
	})
	t.Run("NodePortFromOutside", func(t *testing.T) { everyPod(t, outside, nodePort(t, "echo-nodeport")) })
	t.Run("LocalTrafficKeepsClientAddress", func(t *testing.T) {
		to := nodePort(t, "echo-local")
		waitAnswer(t, func() (string, error) { return outside.Source(to, timeout) })
		for range 5 {
			got, err := outside.Source(to, timeout)
			if err != nil {
				t.Fatal(err)
			}
			name, from, _ := strings.Cut(got, " ")
			if !slices.Contains(pods, name) || from != outsideIP.String() {
				t.Errorf("answer %q: want an echo pod seeing %s", got, outsideIP)
			}
		}
	})
	t.Run("SessionAffinity", func(t *testing.T) {
		to := clusterIP(t, "echo-affinity")
		if got := answers(t, 20, func() (string, error) { return client.HTTP(to, timeout) }); len(got) != 1 {
			t.Errorf("answers from %s with ClientIP affinity: %v, want one pod", to, got)
		}
	})
}

// waitAnswer waits up to a minute for send's first answer, and says how
// long it took when it had to wait.
func waitAnswer(t *testing.T, send func() (string, error)) {
	t.Helper()
	start := time.Now()
	if err := framework.Eventually(time.Minute, 200*time.Millisecond, func() error { _, err := send(); return err }); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("first answer after %s", waited.Round(100*time.Millisecond))
	}
}
