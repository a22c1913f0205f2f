//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestLongLivedConnectionDrains: a long-lived TCP connection keeps working
// while its pod's endpoint is removed (graceful termination) and new
// connections go to the other pod; it keeps working when the Service itself
// is deleted, whose VIP stays bound while no new connection is taken
// (upstream cuts it at once); once it closes, the virtual server, the VIP
// and its entry go. Every connection here ends with a RST, so that IPVS
// forgets it in seconds rather than two minutes of TIME_WAIT.
func TestLongLivedConnectionDrains(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "drain"
	mustNamespace(t, ns)
	a, b := mustPod(t, "drain-a", "10.244.38.1", true), mustPod(t, "drain-b", "10.244.38.2", true)
	client := mustPod(t, "drain-client", "10.244.38.100", false)
	svc, slice := webService(ns, "10.96.38.10", a)
	mustApply(t, svc, slice)
	vip := ap("10.96.38.10:80")
	key := ipvs.Key{Address: vip.Addr(), Protocol: ipvs.TCP, Port: 80}
	ask := func(c *framework.Conn) (string, error) { return c.Get("/", 2*time.Second) }
	fresh := func() (string, error) { // a new connection's answer, reset after
		c, err := client.KeepAlive(vip, time.Second)
		if err != nil {
			return "", err
		}
		defer c.Reset()
		return ask(c)
	}
	eventually(t, "drain-a serving", 30*time.Second, func() error {
		if got, err := fresh(); err != nil || got != "drain-a" {
			return fmt.Errorf("answer %q, %v", got, err)
		}
		return nil
	})
	long, err := client.KeepAlive(vip, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer long.Reset()
	if got, err := ask(long); err != nil || got != "drain-a" {
		t.Fatalf("long-lived connection: %q, %v", got, err)
	}

	// drain-a's endpoint goes: weight 0, its connection lives on.
	_, onlyB := webService(ns, "10.96.38.10", b)
	mustApply(t, onlyB)
	eventually(t, "drain-a at weight 0, drain-b at 1", 30*time.Second, func() error {
		rs, err := realServers(t, key)
		if want := []string{"10.244.38.1:8080/0", "10.244.38.2:8080/1"}; err != nil || strings.Join(rs, " ") != strings.Join(want, " ") {
			return fmt.Errorf("real servers %v, %v", rs, err)
		}
		return nil
	})
	if got, err := fresh(); err != nil || got != "drain-b" {
		t.Errorf("a new connection got %q, %v; want drain-b", got, err)
	}
	if got, err := ask(long); err != nil || got != "drain-a" {
		t.Errorf("the long-lived connection after its endpoint went: %q, %v", got, err)
	}

	// The Service goes: its connection lives on, nothing new is taken.
	if err := env.DeleteService(ns, "web"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every real server at weight 0", 30*time.Second, func() error {
		rs, err := realServers(t, key)
		if err != nil || len(rs) == 0 || strings.Contains(strings.Join(rs, " "), "/1") {
			return fmt.Errorf("real servers %v, %v", rs, err)
		}
		return nil
	})
	if got, err := fresh(); err == nil {
		t.Errorf("the deleted Service took a new connection: %q", got)
	}
	if got, err := ask(long); err != nil || got != "drain-a" {
		t.Errorf("the long-lived connection after its Service was deleted: %q, %v", got, err)
	}
	if !hasAddress(t, vip.Addr()) || !hasEntry(t, "KUBE-IPVS-IPS", ipset.Entry{IP: vip.Addr()}) {
		t.Error("the draining Service's VIP left kube-ipvs0 or KUBE-IPVS-IPS")
	}

	// It closes: within IPVS's 10 s for a reset connection and a drift
	// check, everything goes.
	long.Reset()
	eventually(t, "the drained Service gone", 40*time.Second, func() error {
		if hasVirtualServer(t, key) || hasAddress(t, vip.Addr()) || hasEntry(t, "KUBE-IPVS-IPS", ipset.Entry{IP: vip.Addr()}) {
			return fmt.Errorf("still there")
		}
		return nil
	})
}
