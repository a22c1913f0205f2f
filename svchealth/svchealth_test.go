package svchealth

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

func get(t *testing.T, port uint16) (int, string, http.Header, error) {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(int(port)) + "/healthz")
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header, nil
}

func TestServer(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	s := New(healthy.Load)
	s.listen = func(port uint16) (net.Listener, error) {
		return net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(int(port)))
	}
	defer s.Close()
	web := types.NamespacedName{Namespace: "ns", Name: "web"}
	p1 := freePort(t)

	if failed := s.Sync(map[types.NamespacedName]Service{web: {Port: p1, LocalEndpoints: 2}}); len(failed) != 0 {
		t.Fatal(failed)
	}
	code, body, h, err := get(t, p1)
	if err != nil || code != 200 || !strings.Contains(body, `"localEndpoints": 2`) || !strings.Contains(body, `"name": "web"`) ||
		h.Get("X-Load-Balancing-Endpoint-Weight") != "2" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("with local endpoints: %d %q %v %v", code, body, h, err)
	}

	s.Sync(map[types.NamespacedName]Service{web: {Port: p1}})
	if code, body, _, err := get(t, p1); err != nil || code != 503 || !strings.Contains(body, `"localEndpoints": 0`) {
		t.Fatalf("without local endpoints: %d %q %v", code, body, err)
	}
	s.Sync(map[types.NamespacedName]Service{web: {Port: p1, LocalEndpoints: 1}})
	healthy.Store(false)
	if code, body, _, err := get(t, p1); err != nil || code != 503 || !strings.Contains(body, `"serviceProxyHealthy": false`) {
		t.Fatalf("proxier unhealthy: %d %q %v", code, body, err)
	}
	healthy.Store(true)

	// A port taken by someone else fails for that Service alone, and is
	// served once free.
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	p2 := freePort(t)
	squatter, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(int(p2)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[types.NamespacedName]Service{web: {Port: p1, LocalEndpoints: 1}, other: {Port: p2, LocalEndpoints: 1}}
	if failed := s.Sync(want); len(failed) != 1 || failed[other] == nil {
		t.Fatalf("failed %v, want the other Service's port alone", failed)
	}
	if code, _, _, err := get(t, p1); err != nil || code != 200 {
		t.Fatalf("web's check stopped for the other's failure: %d %v", code, err)
	}
	squatter.Close()
	if failed := s.Sync(want); len(failed) != 0 {
		t.Fatal(failed)
	}
	if code, _, _, err := get(t, p2); err != nil || code != 200 {
		t.Fatalf("the other's check after its port freed: %d %v", code, err)
	}

	// Gone from the Services: the port is closed.
	s.Sync(map[types.NamespacedName]Service{other: {Port: p2, LocalEndpoints: 1}})
	if _, _, _, err := get(t, p1); err == nil {
		t.Fatal("a removed health check still answers")
	}
}
