//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestKernelRefusesOneRealServer: the kernel refuses one real server of one
// Service. That Service keeps answering from its other pod, another
// Service keeps answering, /livez stays 200 for longer than the health
// timeout, and the operator hears of it once (a log line, an Event, the
// failed-objects gauge). Once the kernel takes the real server, it is
// programmed within the retry cap and everything recovers.
//
// How the kernel is made to refuse it: IPVS adds a real server only if the
// routing tables call its address local or unicast (ip_vs_ctl.c checks
// inet_addr_type, else EINVAL). A broadcast route for the pod's address in
// the local table makes it a broadcast address; deleting the route lets the
// same write succeed.
func TestKernelRefusesOneRealServer(t *testing.T) {
	t.Parallel()
	proxier := ourProxier(t)
	const ns = "refused"
	mustNamespace(t, ns)
	a, b := mustPod(t, "refused-a", "10.244.25.1", true), mustPod(t, "refused-b", "10.244.25.2", true)
	client := mustPod(t, "refused-client", "10.244.25.100", false)
	broadcast := []string{"ip", "route", "add", "broadcast", b.IP.String(), "dev", "lo", "table", "local"}
	if _, err := framework.Output(broadcast...); err != nil {
		t.Fatal(err)
	}
	unbroadcast := func() { _, _ = framework.Output(append([]string{"ip", "route", "del"}, broadcast[3:]...)...) }
	t.Cleanup(unbroadcast)

	port := []discovery.EndpointPort{framework.SlicePort("", v1.ProtocolTCP, 8080)}
	mustApply(t,
		framework.ClusterIPService(ns, "web", "10.96.25.10", framework.Port("", v1.ProtocolTCP, 80, 8080)),
		framework.Slice(ns, "web", "web-1", port, framework.Endpoint(a.IP.String(), "", true), framework.Endpoint(b.IP.String(), "", true)),
		framework.ClusterIPService(ns, "other", "10.96.25.11", framework.Port("", v1.ProtocolTCP, 80, 8080)),
		framework.Slice(ns, "other", "other-1", port, framework.Endpoint(a.IP.String(), "", true)))

	web, other := ap("10.96.25.10:80"), ap("10.96.25.11:80")
	webKey := ipvs.Key{Address: web.Addr(), Protocol: ipvs.TCP, Port: 80}
	refused := b.IP.String() + ":8080"
	eventually(t, "the refused real server reported", 30*time.Second, func() error {
		rs, err := realServers(t, webKey)
		if err != nil || strings.Join(rs, ",") != a.IP.String()+":8080/1" {
			return fmt.Errorf("real servers %v, %v; want only %s's", rs, err, a.Name)
		}
		if n := failedRealServers(t); n != 1 {
			return fmt.Errorf("failed real servers gauge %v, want 1", n)
		}
		return nil
	})
	waitAnswerSet(t, client.HTTP, web, a.Name, 6, 10*time.Second)
	// The other Service's slice may be programmed a sync after it.
	waitAnswerSet(t, client.HTTP, other, a.Name, 3, 10*time.Second)

	// The health timeout is two sync periods (10 s here): stay past it,
	// with the refused object retried and both Services answering.
	for end := time.Now().Add(12 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		if code, body := get(t, "http://127.0.0.1:10256/livez"); code != 200 {
			t.Fatalf("/livez answered %d %s with one refused real server", code, body)
		}
		for _, to := range []struct{ vip, want string }{{web.String(), a.Name}, {other.String(), a.Name}} {
			if who, err := client.HTTP(ap(to.vip), 2*time.Second); err != nil || who != to.want {
				t.Fatalf("%s answered %q, %v; want %s", to.vip, who, err, to.want)
			}
		}
	}
	if n := logLines(t, proxier, "kernel refused an object", refused); n != 1 {
		t.Errorf("%d warning lines for the refused real server, want one however often it is retried", n)
	}
	eventually(t, "a KernelRefused event on the Service", 10*time.Second, func() error {
		events, err := env.Events(ns)
		if err != nil {
			return err
		}
		for _, e := range events {
			if strings.HasPrefix(e, "web KernelRefused ") && strings.Contains(e, refused) {
				return nil
			}
		}
		return fmt.Errorf("events %q", events)
	})

	// The kernel takes it now: programmed at the next retry (at most a
	// sync period away), and everything reports recovery.
	unbroadcast()
	waitAnswerSet(t, client.HTTP, web, a.Name+","+b.Name, 8, 15*time.Second)
	if n := failedRealServers(t); n != 0 {
		t.Errorf("failed real servers gauge %v after recovery, want 0", n)
	}
	if n := logLines(t, proxier, "kernel object programmed after failing", refused); n != 1 {
		t.Errorf("%d recovery lines for the real server, want 1", n)
	}
}

func failedRealServers(t *testing.T) float64 {
	t.Helper()
	return gauge(t, `kube_ipvs_proxy_failed_objects{kind="real_server"}`)
}

// gauge scrapes the shared proxier's metric with these labels.
func gauge(t *testing.T, series string) float64 {
	t.Helper()
	all, err := framework.Scrape()
	if err != nil {
		t.Fatal(err)
	}
	v, ok := all[series]
	if !ok {
		t.Fatalf("no metric %s", series)
	}
	return v
}

// logLines counts the lines of p's log that hold every one of words.
func logLines(t *testing.T, p *framework.Process, words ...string) int {
	t.Helper()
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(data), "\n") {
		all := true
		for _, w := range words {
			all = all && strings.Contains(l, w)
		}
		if all {
			n++
		}
	}
	return n
}
