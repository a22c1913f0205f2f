package app

import (
	"bytes"
	"encoding/json"
	"errors"
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
	for _, tc := range []struct {
		from   string
		remote bool
		want   int
	}{
		{"127.0.0.1:40000", false, http.StatusOK},
		{"[::1]:40000", false, http.StatusOK},
		{"192.0.2.7:40000", false, http.StatusForbidden},
		{"192.0.2.7:40000", true, http.StatusOK},
	} {
		req := httptest.NewRequest("GET", "/debug/state?service=ns/a&service=ns/b", nil)
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
