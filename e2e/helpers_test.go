//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

type ask func(to netip.AddrPort, timeout time.Duration) (string, error)

// answers sends n requests and returns who answered each, failing on any error.
func answers(q ask, to netip.AddrPort, n int) ([]string, error) {
	var who []string
	for i := 0; i < n; i++ {
		name, err := q(to, 2*time.Second)
		if err != nil {
			return who, fmt.Errorf("request %d to %s: %w", i, to, err)
		}
		who = append(who, name)
	}
	return who, nil
}

func set(names []string) string {
	u := slices.Clone(names)
	sort.Strings(u)
	return strings.Join(slices.Compact(u), ",")
}

// waitAnswerSet waits until n requests in a row are answered by exactly want
// (a sorted, comma-separated list), and returns how long that took.
func waitAnswerSet(t *testing.T, q ask, to netip.AddrPort, want string, n int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	for time.Since(start) < timeout {
		t0 := time.Since(start)
		who, err := answers(q, to, n)
		if err == nil && set(who) == want {
			return t0
		}
		last = fmt.Sprintf("%v %v", who, err)
	}
	t.Fatalf("%s: wanted answers from {%s} within %s; last round: %s", to, want, timeout, last)
	return 0
}

// kernel readers, through the project's own netlink packages.
var (
	kipvs  *ipvs.Netlink
	ksets  *ipset.Netlink
	klinks = dummyiface.NewNetlink(dummyiface.DefaultLinkName)
)

func kernelIPVS(t *testing.T) *ipvs.Netlink {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if kipvs == nil {
		var err error
		if kipvs, err = ipvs.NewNetlink(); err != nil {
			t.Fatal(err)
		}
		if ksets, err = ipset.NewNetlink(); err != nil {
			t.Fatal(err)
		}
	}
	return kipvs
}

// realServers lists "addr:port/weight" of a virtual server, or an error if it is missing.
func realServers(t *testing.T, k ipvs.Key) ([]string, error) {
	list, err := kernelIPVS(t).RealServers(k)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range list {
		out = append(out, fmt.Sprintf("%s/%d", r.ID(), r.Weight))
	}
	sort.Strings(out)
	return out, nil
}

func hasVirtualServer(t *testing.T, k ipvs.Key) bool {
	list, err := kernelIPVS(t).VirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	for _, vs := range list {
		if vs.Key == k {
			return true
		}
	}
	return false
}

func hasAddress(t *testing.T, a netip.Addr) bool {
	list, err := klinks.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(list, a)
}

func hasEntry(t *testing.T, set string, e ipset.Entry) bool {
	kernelIPVS(t)
	list, err := ksets.Entries(set)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Contains(list, e)
}

// webService is Service ns/web on vip:80/TCP with the pods behind it on 8080.
func webService(ns, vip string, pods ...*framework.Pod) (*v1.Service, *discovery.EndpointSlice) {
	var eps []discovery.Endpoint
	for _, p := range pods {
		eps = append(eps, framework.Endpoint(p.IP.String(), "", true))
	}
	return framework.ClusterIPService(ns, "web", vip, framework.Port("", v1.ProtocolTCP, 80, 8080)),
		framework.Slice(ns, "web", "web-1", []discovery.EndpointPort{framework.SlicePort("", v1.ProtocolTCP, 8080)}, eps...)
}

func eventually(t *testing.T, what string, timeout time.Duration, fn func() error) {
	t.Helper()
	if err := framework.Eventually(timeout, 50*time.Millisecond, fn); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// expectClientSeen asks to once and requires pod to answer, seeing the
// client's own address (not masqueraded).
func expectClientSeen(t *testing.T, client *framework.Pod, to netip.AddrPort, pod string) {
	t.Helper()
	answer, err := client.Source(to, 2*time.Second)
	if want := pod + " " + client.IP.String(); err != nil || answer != want {
		t.Errorf("answer %q, %v; want %q: the client's address must reach the pod", answer, err, want)
	}
}

// loopResult is what a client loop saw.
type loopResult struct {
	requests, failed int64
	slow             int64       // answered, after over a second (a SYN sent again, say)
	first            error       // the first failure
	failedAt         []time.Time // when each failed request was sent
}

// clientLoop calls ask, pausing every between calls, until the returned
// stop is called; stop waits for the loop to end and says what it saw.
func clientLoop(every time.Duration, ask func() error) (stop func() loopResult) {
	var res loopResult
	var mu sync.Mutex
	done := make(chan struct{})
	var loop sync.WaitGroup
	loop.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			sent := time.Now()
			err := ask()
			mu.Lock()
			res.requests++
			switch {
			case err != nil:
				res.failed++
				res.failedAt = append(res.failedAt, sent)
				if res.first == nil {
					res.first = err
				}
			case time.Since(sent) > time.Second:
				res.slow++
			}
			mu.Unlock()
			time.Sleep(every)
		}
	})
	return func() loopResult {
		close(done)
		loop.Wait()
		mu.Lock()
		defer mu.Unlock()
		return res
	}
}
