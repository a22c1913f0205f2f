package app

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestCriticalClientHasItsOwnConnection: clients of one configuration share
// a connection, the critical Services' client does not, so the cluster-wide
// lists cannot hold up its answers.
func TestCriticalClientHasItsOwnConnection(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37","gitVersion":"v1.37.2"}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	ask := func(ownConnection bool) {
		t.Helper()
		c, err := newClient(ClientOptions{Master: srv.URL, ContentType: "application/json", QPS: 100, Burst: 100}, ownConnection)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Reachable(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	ask(false)
	ask(false)
	if n := conns.Load(); n != 1 {
		t.Fatalf("two clients of one configuration opened %d connections, want 1 (the test's premise)", n)
	}
	ask(true)
	if n := conns.Load(); n != 2 {
		t.Errorf("after the critical client's request: %d connections, want 2", n)
	}
}
