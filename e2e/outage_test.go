//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestAPIServerOutage stops kube-apiserver for 60 s. A client looping on a
// Service sees no failed request, the proxier writes nothing to the kernel
// (so removes nothing), and /healthz stays 200, as upstream's does with no
// change pending. Meanwhile a Service is deleted straight from etcd, as
// another apiserver of an HA control plane would delete it. The proxier's
// watches resume at a resource version the restarted apiserver no longer
// has, so they expire with 410 Gone and the proxier relists: the deletion
// is programmed, and so are changes made right after the apiserver is back.
// Serial: every test needs the apiserver.
func TestAPIServerOutage(t *testing.T) {
	ourProxier(t)
	const ns = "outage"
	mustNamespace(t, ns)
	a, b := mustPod(t, "outage-a", "10.244.41.1", true), mustPod(t, "outage-b", "10.244.41.2", true)
	client := mustPod(t, "outage-client", "10.244.41.100", false)
	svc, slice := webService(ns, "10.96.41.10", a)
	gone, goneSlice := webService(ns, "10.96.41.12", a)
	gone.Name, goneSlice.Name = "gone", "gone-1"
	goneSlice.Labels[discovery.LabelServiceName] = "gone"
	mustApply(t, svc, slice, gone, goneSlice)
	vip, goneVIP := ap("10.96.41.10:80"), ap("10.96.41.12:80")
	goneKey := ipvs.Key{Address: goneVIP.Addr(), Protocol: ipvs.TCP, Port: 80}
	waitAnswerSet(t, client.HTTP, vip, "outage-a", 2, 30*time.Second)
	waitAnswerSet(t, client.HTTP, goneVIP, "outage-a", 2, 30*time.Second)

	stop := clientLoop(100*time.Millisecond, func() error {
		_, err := client.HTTP(vip, 2*time.Second)
		return err
	})
	const ops = "kube_ipvs_proxy_kernel_operations_total"
	opsBefore := gauge(t, ops)

	stopped := time.Now()
	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.StartAPIServer() }) // later tests need it
	if _, err := env.Admin.Discovery().ServerVersion(); err == nil {
		t.Fatal("the apiserver still answers: the outage is not one")
	}
	if err := env.Cluster("etcd-delete /registry/services/specs/" + ns + "/gone"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(stopped.Add(55 * time.Second)))
	if status, body := get(t, "http://127.0.0.1:10256/healthz"); status != 200 {
		t.Errorf("/healthz during the outage: %d %s", status, body)
	}
	time.Sleep(time.Until(stopped.Add(60 * time.Second)))
	if got := gauge(t, ops); got != opsBefore {
		t.Errorf("%v kernel writes during the outage, want none", got-opsBefore)
	}
	if !hasVirtualServer(t, goneKey) {
		t.Error("the deleted Service's virtual server went while the apiserver was away")
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}

	// Right after it is back: a new endpoint and a new Service. client-go's
	// reflectors retry the watch, then relist after its 410, each after a
	// backoff that reaches 30-60 s during an outage (it spares an apiserver
	// that thousands of nodes reconnect to, and upstream waits the same):
	// up to two minutes in all.
	_, both := webService(ns, "10.96.41.10", a, b)
	after, afterSlice := webService(ns, "10.96.41.11", a)
	after.Name, afterSlice.Name = "after", "after-1"
	afterSlice.Labels[discovery.LabelServiceName] = "after"
	mustApply(t, both, after, afterSlice)
	waitAnswerSet(t, client.HTTP, vip, "outage-a,outage-b", 8, 150*time.Second)
	waitAnswerSet(t, client.HTTP, ap("10.96.41.11:80"), "outage-a", 2, 150*time.Second)
	// Its virtual server drains first: the TIME_WAIT entries of the two
	// requests made to it before the outage hold it for up to two minutes.
	eventually(t, "the Service deleted while the apiserver was away is removed", 150*time.Second, func() error {
		if hasVirtualServer(t, goneKey) || hasAddress(t, goneVIP.Addr()) {
			return fmt.Errorf("%v is still programmed", goneVIP)
		}
		return nil
	})
	seen := stop()
	if seen.failed != 0 {
		t.Errorf("%d of %d requests failed across the outage; first: %v", seen.failed, seen.requests, seen.first)
	}
	t.Logf("%d requests across the outage, %d failed", seen.requests, seen.failed)

	// The relists came from expired watches (410 Gone), not from broken
	// connections: client-go logs them through our logger at -v 4.
	log, err := os.ReadFile(ourProxier(t).LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"*v1.Service", "*v1.EndpointSlice"} {
		expired := false
		for line := range strings.Lines(string(log)) {
			expired = expired || strings.Contains(line, "too old resource version") && strings.Contains(line, `"`+kind+`"`)
		}
		if !expired {
			t.Errorf("no %s watch expired with 410 Gone in %s", kind, ourProxier(t).LogPath)
		}
	}
}
