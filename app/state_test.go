package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/view"
)

type fixedState struct {
	state view.State
	asked []types.NamespacedName
}

func (f *fixedState) State(names ...types.NamespacedName) view.State {
	f.asked = names
	return f.state
}

func TestStateAnswersLoopbackOnlyUnlessRemote(t *testing.T) {
	src := &fixedState{state: view.State{Services: []view.Service{}, Failed: []status.Object{}}}
	// The metrics address may be the node's own (status then connects
	// to it, from it): a client whose address is the one it reached is
	// on the node.
	node := &net.TCPAddr{IP: net.ParseIP("10.0.2.15"), Port: 10249}
	for _, tc := range []struct {
		from   string
		remote bool
		want   int
	}{
		{"127.0.0.1:40000", false, http.StatusOK},
		{"[::1]:40000", false, http.StatusOK},
		{"10.0.2.15:40000", false, http.StatusOK},
		{"192.0.2.7:40000", false, http.StatusForbidden},
		{"192.0.2.7:40000", true, http.StatusOK},
	} {
		req := httptest.NewRequest("GET", "/debug/state?service=ns/a&service=ns/b", nil)
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.Addr(node)))
		req.RemoteAddr = tc.from
		rec := httptest.NewRecorder()
		stateHandler(src, tc.remote).ServeHTTP(rec, req)
		if rec.Code != tc.want {
			t.Errorf("from %s (remote %v): %d, want %d", tc.from, tc.remote, rec.Code, tc.want)
		}
	}
	if len(src.asked) != 2 || src.asked[1] != (types.NamespacedName{Namespace: "ns", Name: "b"}) {
		t.Errorf("asked for %v, want ns/a and ns/b", src.asked)
	}
}

func TestStatusPrintsALinePerService(t *testing.T) {
	now := time.Now()
	failure := status.Object{Kind: status.KindRealServer, Object: "10.96.0.1:80/TCP 10.244.0.2:8080",
		Failure: status.Failure{Err: errors.New("refused"), Attempts: 3, RetryAt: now.Add(4 * time.Second)}}
	src := view.State{
		Services: []view.Service{{Name: "ns/a", VirtualServers: []view.VirtualServer{{Key: "10.96.0.1:80/TCP", Scheduler: "rr", Held: true,
			Reals: []view.Real{{Address: "10.244.0.1:8080", Wanted: true, Held: true}, {Address: "10.244.0.2:8080", Wanted: true}}}},
			Failed: []status.Object{failure}},
			{Name: "ns/b", Programmed: now.Add(-time.Minute)}},
		Failed: []status.Object{failure, {Kind: status.KindSetup, Object: "kernel", Failure: status.Failure{Err: errors.New("no iptables"), Attempts: 1, RetryAt: now}}},
	}
	body, err := json.Marshal(src)
	if err != nil {
		t.Fatal(err)
	}
	var st view.State
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := printStatus(&out, st, now); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want a header, two Services and the setup's failure:\n%s", len(lines), out.String())
	}
	for i, want := range [][]string{
		{"ns/a", "10.96.0.1:80/TCP", "1/2", "rr", "pending", "1: real_server 10.96.0.1:80/TCP 10.244.0.2:8080: refused (3 attempts, retry in 4s)"},
		{"ns/b", "0/0", "1m0s ago", "-"},
		{"failed setup kernel: no iptables (1 attempts, retry now)"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("line %q lacks %q", lines[i+1], w)
			}
		}
	}
}

// On a real socket: a client on this machine that connects to one of its
// non-loopback addresses is taken for the node, as status is when the
// metrics address is the node's own.
func TestStateAnswersOnTheNodesOwnAddress(t *testing.T) {
	var own net.IP
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			own = n.IP
			break
		}
	}
	if own == nil {
		t.Skip("this machine has no non-loopback IPv4 address")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(own.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: stateHandler(&fixedState{state: view.State{Services: []view.Service{}, Failed: []status.Object{}}}, false)}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	if _, err := fetchState(ln.Addr().String(), nil); err != nil {
		t.Errorf("status on %s from this machine: %v", ln.Addr(), err)
	}
}
