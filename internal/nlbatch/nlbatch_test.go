package nlbatch

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestAttrsArePaddedAndNestsSized(t *testing.T) {
	b := Attr(nil, 1, []byte{7})
	if len(b) != 8 || binary.NativeEndian.Uint16(b) != 5 {
		t.Fatalf("1-byte attribute = % x, want length 5 padded to 8 bytes", b)
	}
	b = Nest(nil, 2|Nested, func(b []byte) []byte {
		b = Attr(b, 1, []byte{1, 2, 3, 4, 5})
		return Attr(b, 2, U16(9))
	})
	if len(b) != 4+12+8 || int(binary.NativeEndian.Uint16(b)) != len(b) {
		t.Fatalf("nest = % x, want its length to cover both children", b)
	}
	if typ := binary.NativeEndian.Uint16(b[2:]); typ != 2|Nested {
		t.Fatalf("nest type = %#x", typ)
	}
	// Attrs walks them back, flags stripped, stopping at a truncated one.
	var got []uint16
	Attrs(b, func(typ uint16, v []byte) {
		Attrs(v, func(typ uint16, v []byte) { got = append(got, typ, uint16(len(v))) })
	})
	Attrs(append(b[:0:0], 8, 0, 1, 0), func(uint16, []byte) { t.Error("walked an attribute longer than its buffer") })
	if len(got) != 4 || got[0] != 1 || got[1] != 5 || got[2] != 2 || got[3] != 2 {
		t.Fatalf("Attrs walked %v, want types 1 and 2 with 5 and 2 bytes", got)
	}
}

// getLoopback asks for link 1 (lo): it succeeds, with a reply that is not an
// acknowledgement.
func getLoopback() Request {
	msg := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(msg[4:], 1)
	return Request{Type: unix.RTM_GETLINK, Data: msg}
}

// addToMissingLink fails: there is no link 999999.
func addToMissingLink() Request {
	msg := []byte{unix.AF_INET, 32, 0, 0}
	msg = append(msg, U32(999999)...)
	return Request{Type: unix.RTM_NEWADDR, Flags: unix.NLM_F_CREATE | unix.NLM_F_EXCL, Data: Attr(msg, unix.IFA_LOCAL, []byte{192, 0, 2, 1})}
}

func TestDoReportsEachRequestsResultAcrossBatches(t *testing.T) {
	c, err := Dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Skipf("no netlink here: %v", err)
	}
	defer c.Close()
	c.perBatch = 7 // several batches, boundaries falling on both kinds
	var reqs []Request
	var fails []bool
	for i := 0; i < 40; i++ {
		fail := i%3 == 1 || i == 39 // the last one fails too
		fails = append(fails, fail)
		if fail {
			reqs = append(reqs, addToMissingLink())
		} else {
			reqs = append(reqs, getLoopback())
		}
	}
	errs := c.Do(reqs)
	if len(errs) != len(reqs) {
		t.Fatalf("%d results for %d requests", len(errs), len(reqs))
	}
	for i, err := range errs {
		if fails[i] != (err != nil) {
			t.Errorf("request %d: error %v, want failure %v", i, err, fails[i])
		}
	}
	// The connection is still in step: a single request afterwards.
	if errs := c.Do([]Request{getLoopback()}); errs[0] != nil {
		t.Fatalf("request after the batches: %v", errs[0])
	}
}

func TestDumpAndGetReadRepliesAndErrors(t *testing.T) {
	c, err := Dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Skipf("no netlink here: %v", err)
	}
	defer c.Close()
	var links []uint32
	err = c.Dump(Request{Type: unix.RTM_GETLINK, Data: make([]byte, unix.SizeofIfInfomsg)}, func(body []byte) {
		links = append(links, binary.NativeEndian.Uint32(body[4:8]))
	})
	if err != nil || len(links) == 0 || links[0] != 1 {
		t.Fatalf("link dump = %v, %v; want lo (1) first", links, err)
	}
	// A failed request in between leaves the connection in step.
	if _, err := c.Get(addToMissingLink()); !errors.Is(err, unix.ENODEV) {
		t.Fatalf("address on a missing link: %v, want ENODEV", err)
	}
	reply, err := c.Get(getLoopback())
	if err != nil || len(reply) < unix.SizeofIfInfomsg || binary.NativeEndian.Uint32(reply[4:8]) != 1 {
		t.Fatalf("get lo = % x, %v", reply, err)
	}
	var again int
	if err := c.Dump(Request{Type: unix.RTM_GETLINK, Data: make([]byte, unix.SizeofIfInfomsg)}, func([]byte) { again++ }); err != nil || again != len(links) {
		t.Fatalf("second dump: %d links, %v; want %d", again, err, len(links))
	}
}

// When the answers to a batch overrun the receive buffer (ENOBUFS), the
// requests whose answer was lost are reported as of unknown outcome, not
// as refused: the kernel may have done them.
func TestLostAnswersAreReportedAsUnknownOutcomes(t *testing.T) {
	c, err := Dial(unix.NETLINK_ROUTE)
	if err != nil {
		t.Skipf("no netlink here: %v", err)
	}
	defer c.Close()
	// The smallest buffer the kernel allows holds a few answers. (A lost
	// answer is waited for only this long.)
	if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 0); err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval((2 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	c.perBatch = 500
	reqs := make([]Request, 500)
	for i := range reqs {
		reqs[i] = addToMissingLink() // each answered with an error
	}
	unknown := 0
	for i, err := range c.Do(reqs) {
		switch {
		case errors.Is(err, ErrOutcomeUnknown):
			unknown++
		case !errors.Is(err, unix.ENODEV):
			t.Fatalf("request %d: %v, want ENODEV or an unknown outcome", i, err)
		}
	}
	if unknown == 0 {
		t.Fatal("500 error answers fit a minimal receive buffer: nothing was lost")
	}
	// The socket answers again at once: the overrun's leftovers were read,
	// which ends the kernel's dropping of its answers.
	if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, wantRcvBuf); err != nil {
		t.Fatal(err)
	}
	if errs := c.Do([]Request{getLoopback()}); errs[0] != nil {
		t.Fatalf("request after the overrun: %v", errs[0])
	}
}
