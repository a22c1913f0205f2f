package informers

import (
	"bytes"
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

// countingConn counts the writes the client makes to the apiserver.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// Reading a watch one small object at a time must not cost a write to the
// apiserver every few objects: with BufferWatches, client-go's own HTTP/2
// transport returns flow-control credit in far fewer writes, and the bytes
// read are the same.
func TestBufferedWatchesWriteLessWhileReading(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<17) // 2 MiB
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for off := 0; off < len(body); off += 64 << 10 {
			_, _ = w.Write(body[off : off+64<<10])
			w.(http.Flusher).Flush()
		}
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	// read fetches path the way the watch decoder reads, 1 KiB at a time,
	// and returns the writes made meanwhile and the response body's type.
	read := func(path string, wrap bool) (writes int64, got io.ReadCloser) {
		t.Helper()
		var n atomic.Int64
		cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca},
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				return countingConn{Conn: c, writes: &n}, err
			}}
		if wrap {
			cfg.Wrap(BufferWatches)
		}
		rt, err := rest.TransportFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("the test needs HTTP/2, got %s", resp.Proto)
		}
		before := n.Load()
		data := make([]byte, 0, len(body))
		chunk := make([]byte, 1<<10)
		for {
			k, err := io.ReadFull(resp.Body, chunk)
			data = append(data, chunk[:k]...)
			if err != nil {
				break
			}
		}
		if !bytes.Equal(data, body) {
			t.Fatalf("read %d bytes, not the %d sent", len(data), len(body))
		}
		return n.Load() - before, resp.Body
	}

	plain, _ := read("/apis/discovery.k8s.io/v1/endpointslices?watch=true", false)
	buffered, wrapped := read("/apis/discovery.k8s.io/v1/endpointslices?watch=true", true)
	t.Logf("writes while reading 2 MiB: %d plain, %d buffered", plain, buffered)
	if plain < 200 {
		t.Fatalf("only %d writes without the buffer; the transport's flow control has changed, revisit watchReadSize", plain)
	}
	if buffered*4 > plain {
		t.Errorf("buffered watch made %d writes, plain %d: want at most a quarter", buffered, plain)
	}
	if _, ok := wrapped.(bufferedBody); !ok {
		t.Errorf("watch body is %T, want bufferedBody", wrapped)
	}
	if _, other := read("/apis/discovery.k8s.io/v1/endpointslices", true); other == nil {
		t.Fatal("no body")
	} else if _, ok := other.(bufferedBody); ok {
		t.Error("a list's body was buffered too; only watches should be")
	}
}
