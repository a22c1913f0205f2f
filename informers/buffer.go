package informers

import (
	"bufio"
	"io"
	"net/http"
)

// watchReadSize is how much of a watch response is read at a time. Go's
// HTTP/2 transport gives the apiserver flow-control credit back (a
// WINDOW_UPDATE for the stream and one for the connection, written as a TLS
// record) every time reads have consumed 4 KiB since it last did, and the
// watch decoder reads one object at a time: about a kilobyte for an
// EndpointSlice. The first list of a large cluster, streamed as a watch,
// then cost a write system call for every few objects (13% of the
// proxier's CPU while listing 10k Services and slices in the test VM).
// Reading 64 KiB at a time returns the credit once per 64 KiB. A read
// returns what has arrived, so a single event is not delayed.
const watchReadSize = 64 << 10

// BufferWatches wraps an apiserver transport so that watch responses are
// read in large chunks (see watchReadSize); other responses are untouched.
// It suits rest.Config.Wrap.
func BufferWatches(rt http.RoundTripper) http.RoundTripper {
	return bufferedWatches{next: rt}
}

type bufferedWatches struct{ next http.RoundTripper }

func (b bufferedWatches) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(req)
	if err != nil || resp.Body == nil || !isWatch(req) {
		return resp, err
	}
	resp.Body = bufferedBody{Reader: bufio.NewReaderSize(resp.Body, watchReadSize), Closer: resp.Body}
	return resp, nil
}

func isWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

type bufferedBody struct {
	*bufio.Reader
	io.Closer
}
