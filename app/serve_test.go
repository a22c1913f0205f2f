package app

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A client that asks for a big answer and never reads it holds the
// server's connection only until the write timeout.
func TestAStalledClientIsCutAtTheWriteTimeout(t *testing.T) {
	saved := serverTimeouts
	defer func() { serverTimeouts = saved }()
	serverTimeouts.write = 200 * time.Millisecond
	cut := make(chan error, 1)
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("x", 1<<20))
		for {
			if _, err := w.Write(chunk); err != nil {
				cut <- err
				return
			}
		}
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "GET /metrics/ipvs HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	select {
	case <-cut:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler still writing to a stalled client 10 s on, past a 200 ms write timeout")
	}
}
