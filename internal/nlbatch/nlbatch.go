// Package nlbatch sends netlink requests many to a system call.
//
// A request per sendmsg, with an acknowledgement read per request, is what
// most netlink libraries do; at 100k real servers those two system calls per
// object are most of a cold start (and far more under emulation). The kernel
// handles every message of one sendmsg in turn, in the sender's context, and
// answers a message without NLM_F_ACK only when it fails. So a batch asks for
// an acknowledgement on its last message alone: by the time that arrives,
// every earlier error is queued before it.
package nlbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Request is one netlink message: its type, flags besides NLM_F_REQUEST and
// NLM_F_ACK, and everything after the netlink header.
type Request struct {
	Type  uint16
	Flags uint16
	Data  []byte
}

// Conn is a netlink socket to the kernel. It is safe for concurrent use;
// batches are sent one at a time.
type Conn struct {
	mu  sync.Mutex
	fd  int
	seq uint32
	// perBatch bounds the requests per sendmsg so that the errors of a
	// whole batch fit the receive buffer: a lost error would read as success.
	perBatch int
	rbuf     []byte
}

// Tuning: a batch is at most maxBatchBytes (the socket's send buffer must
// hold it) and at most one error reply per errorBytes of receive buffer.
const (
	maxBatchBytes = 128 << 10
	wantRcvBuf    = 4 << 20
	errorBytes    = 2 << 10
	replyTimeout  = 30 * time.Second
)

// Dial opens a netlink socket of the given protocol (unix.NETLINK_GENERIC,
// NETLINK_ROUTE, NETLINK_NETFILTER).
func Dial(protocol int) (*Conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, protocol)
	if err != nil {
		return nil, fmt.Errorf("netlink socket: %w", err)
	}
	c := &Conn{fd: fd, rbuf: make([]byte, 64<<10)}
	if err := c.setup(); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return c, nil
}

func (c *Conn) setup() error {
	if err := unix.Bind(c.fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("bind netlink socket: %w", err)
	}
	// A big receive buffer lets batches be big. Forcing it past rmem_max
	// needs CAP_NET_ADMIN, which a service proxy has; without it the
	// batches are smaller.
	if unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, wantRcvBuf) != nil {
		_ = unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF, wantRcvBuf)
	}
	if err := unix.SetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 2*maxBatchBytes); err != nil {
		return fmt.Errorf("netlink send buffer: %w", err)
	}
	// Error replies carry only the failed message's header, not its body.
	_ = unix.SetsockoptInt(c.fd, unix.SOL_NETLINK, unix.NETLINK_CAP_ACK, 1)
	tv := unix.NsecToTimeval(replyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(c.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return fmt.Errorf("netlink receive timeout: %w", err)
	}
	rcv, err := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if err != nil {
		return fmt.Errorf("netlink receive buffer: %w", err)
	}
	c.perBatch = min(max(rcv/errorBytes, 1), 1024)
	return nil
}

// StrictDumps makes the kernel honour a dump request's filters (such as an
// address dump's interface index) instead of dumping everything, and
// refuse a request it cannot parse exactly (NETLINK_GET_STRICT_CHK, Linux
// 4.20). A kernel without it (ENOPROTOOPT: RHEL 8's 4.18) is no error: its
// dumps answer more, and the readers here filter what they get themselves.
func (c *Conn) StrictDumps() error {
	err := unix.SetsockoptInt(c.fd, unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1)
	if err != nil && !errors.Is(err, unix.ENOPROTOOPT) {
		return fmt.Errorf("netlink strict checking: %w", err)
	}
	return nil
}

// SmallReads makes the socket receive a page at a time (at most 8 KiB),
// for many small dumps. The kernel sizes a dump's buffers by the largest
// receive the socket has offered (up to 32 KiB), and allocates one for each
// round of the dump and one for its end: at a dump per virtual server those
// allocations are most of the cost. In the test VM, 10k dumps of 10 real
// servers took 2.6 s of system time read 64 KiB at a time and 1.4 s read
// 4 KiB at a time. A round is no bigger than a page less overhead
// (NLMSG_GOODSIZE) unless the dump asks for more (rtnetlink's link dumps
// do, so this is not for them); a reply cut short fails with ErrTruncated.
func (c *Conn) SmallReads() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rbuf = make([]byte, min(os.Getpagesize(), 8<<10))
}

// Close closes the socket.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return unix.Close(c.fd)
}

// Do sends the requests in order, in as few system calls as the socket
// allows, and returns one result per request: nil when the kernel accepted it.
func (c *Conn) Do(reqs []Request) []error {
	errs := make([]error, len(reqs))
	c.mu.Lock()
	defer c.mu.Unlock()
	for start := 0; start < len(reqs); {
		end, size := start, 0
		for end < len(reqs) && end-start < c.perBatch {
			n := msgLen(reqs[end])
			if end > start && size+n > maxBatchBytes {
				break
			}
			size += n
			end++
		}
		c.batch(reqs[start:end], errs[start:end])
		start = end
	}
	return errs
}

const hdrLen = unix.SizeofNlMsghdr

func msgLen(r Request) int { return align(hdrLen + len(r.Data)) }

func align(n int) int { return (n + 3) &^ 3 }

// batch sends reqs in one sendmsg and fills errs from the replies.
func (c *Conn) batch(reqs []Request, errs []error) {
	first := c.seq + 1
	var buf []byte
	for i, r := range reqs {
		flags := r.Flags | unix.NLM_F_REQUEST
		if i == len(reqs)-1 {
			flags |= unix.NLM_F_ACK
		}
		c.seq++
		buf = appendHeader(buf, uint32(hdrLen+len(r.Data)), r.Type, flags, c.seq)
		buf = append(buf, r.Data...)
		buf = pad(buf)
	}
	if err := unix.Sendto(c.fd, buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		fill(errs, fmt.Errorf("netlink send: %w", err))
		return
	}
	last := c.seq
	answer := func(typ, _ uint16, seq uint32, body []byte) bool {
		if typ != unix.NLMSG_ERROR || seq < first || seq > last || len(body) < 4 {
			return false
		}
		if code := int32(binary.NativeEndian.Uint32(body)); code != 0 {
			errs[seq-first] = syscall.Errno(-code)
		}
		return seq == last
	}
	if err := c.receive(0, answer); err != nil {
		// ENOBUFS: answers were dropped. The kernel handled the whole
		// batch as it was sent, so the answers that made it are queued:
		// their refusals are real. What happened to the rest is unknown:
		// the kernel may have done any of it.
		c.drain(answer)
		fillUnset(errs, fmt.Errorf("netlink receive: %w: %w", err, ErrOutcomeUnknown))
	}
}

// drain reads, without waiting, whatever is queued on the socket, passing
// each message to handle (nil: dropping it). After an overrun the kernel
// drops every answer to this socket until its queue has been read empty,
// so without this the next request's answer would be lost too, and the
// request would wait out the receive timeout. A dump left running is read
// to its end, the kernel filling the queue as it is read.
func (c *Conn) drain(handle func(typ, flags uint16, seq uint32, body []byte) bool) {
	for {
		err := c.receive(unix.MSG_DONTWAIT, func(typ, flags uint16, seq uint32, body []byte) bool {
			if handle != nil {
				handle(typ, flags, seq, body)
			}
			return false
		})
		if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, ErrTruncated) {
			return // EAGAIN: empty
		}
	}
}

// receive reads replies and passes each message to handle until it
// returns true. recvFlags are recvmsg(2)'s flags.
func (c *Conn) receive(recvFlags int, handle func(typ, flags uint16, seq uint32, body []byte) (done bool)) error {
	for {
		n, _, got, _, err := unix.Recvmsg(c.fd, c.rbuf, nil, recvFlags)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if got&unix.MSG_TRUNC != 0 {
			return ErrTruncated
		}
		for b := c.rbuf[:n]; len(b) >= hdrLen; {
			l := int(binary.NativeEndian.Uint32(b[0:4]))
			if l < hdrLen || l > len(b) {
				break
			}
			typ := binary.NativeEndian.Uint16(b[4:6])
			flags := binary.NativeEndian.Uint16(b[6:8])
			seq := binary.NativeEndian.Uint32(b[8:12])
			body := b[hdrLen:l]
			b = b[min(align(l), len(b)):]
			if handle(typ, flags, seq, body) {
				return nil
			}
		}
	}
}

// Dump sends one request with NLM_F_DUMP and calls each with the body of
// every message the kernel answers, until the dump is done. A netlink socket
// runs one dump at a time, so dumps on one Conn are serial; open more Conns
// to read in parallel.
//
// The kernel answers a dump a buffer at a time and lets its table change in
// between; a table that tracks such changes flags the messages after one
// (NLM_F_DUMP_INTR). Dump then reads the dump to its end, to keep the
// socket in step, and returns ErrDumpInterrupted: what each was given may
// miss entries or repeat them, and must be thrown away (see Whole).
func (c *Conn) Dump(r Request, each func(body []byte)) error {
	r.Flags |= unix.NLM_F_DUMP
	interrupted := false
	err := c.exchange(r, func(typ, flags uint16, body []byte) bool {
		if flags&unix.NLM_F_DUMP_INTR != 0 {
			interrupted = true
		}
		switch typ {
		case unix.NLMSG_DONE:
			return true
		case unix.NLMSG_NOOP:
			return false
		}
		if !interrupted {
			each(body)
		}
		return false
	})
	if err == nil && interrupted {
		return ErrDumpInterrupted
	}
	return err
}

// ErrDumpInterrupted says a dump's table changed while it was read: its
// entries are not a whole list.
var ErrDumpInterrupted = errors.New("netlink dump interrupted: the table changed while it was read")

// ErrTruncated says a reply was bigger than the receive buffer and was cut:
// what it held is lost, and with it whether a request was refused.
var ErrTruncated = fmt.Errorf("netlink reply bigger than the receive buffer: %w", ErrOutcomeUnknown)

// ErrOutcomeUnknown says the kernel's answer to a request was lost (the
// receive buffer overran, or the answer timed out): the kernel may have
// done what it asked, or refused it. Read the object back to know.
var ErrOutcomeUnknown = errors.New("the kernel's answer was lost; the request may have taken effect")

// WholeAttempts is how many times Whole reads a list that keeps being
// interrupted before it gives up.
const WholeAttempts = 8

// Whole calls read, which must start its list afresh each time, until it
// returns anything but ErrDumpInterrupted, at most WholeAttempts times.
// Pods starting and stopping change the node's links and addresses all the
// time, so an interrupted dump is routine; a half-read list is never used.
func Whole(read func() error) error {
	var err error
	for i := 0; i < WholeAttempts; i++ {
		if i > 1 {
			time.Sleep(time.Millisecond << i) // let a burst of changes pass
		}
		if err = read(); !errors.Is(err, ErrDumpInterrupted) {
			return err
		}
	}
	return fmt.Errorf("%w %d times in a row", err, WholeAttempts)
}

// Get sends one request that the kernel answers with one message, and
// returns that message's body.
func (c *Conn) Get(r Request) ([]byte, error) {
	var reply []byte
	err := c.exchange(r, func(_, _ uint16, body []byte) bool {
		reply = append([]byte{}, body...)
		return true
	})
	return reply, err
}

// exchange sends r alone and passes every reply to it to handle until
// handle returns true. An error reply, or a dump's end carrying an error,
// ends the exchange with that error.
func (c *Conn) exchange(r Request, handle func(typ, flags uint16, body []byte) (done bool)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	seq := c.seq
	buf := appendHeader(nil, uint32(hdrLen+len(r.Data)), r.Type, r.Flags|unix.NLM_F_REQUEST, seq)
	buf = pad(append(buf, r.Data...))
	if err := unix.Sendto(c.fd, buf, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("netlink send: %w", err)
	}
	var failed error
	err := c.receive(0, func(typ, flags uint16, mseq uint32, body []byte) bool {
		if mseq != seq {
			return false // a late reply to an earlier request
		}
		if (typ == unix.NLMSG_ERROR || typ == unix.NLMSG_DONE) && len(body) >= 4 {
			if code := int32(binary.NativeEndian.Uint32(body)); code != 0 {
				failed = syscall.Errno(-code)
				return true
			}
			if typ == unix.NLMSG_ERROR {
				return true // an acknowledgement
			}
		}
		return handle(typ, flags, body)
	})
	if err != nil {
		c.drain(nil)
		return fmt.Errorf("netlink receive: %w", err)
	}
	return failed
}

func fill(errs []error, err error) {
	for i := range errs {
		errs[i] = err
	}
}

func fillUnset(errs []error, err error) {
	for i := range errs {
		if errs[i] == nil {
			errs[i] = err
		}
	}
}

func appendHeader(b []byte, length uint32, typ, flags uint16, seq uint32) []byte {
	b = binary.NativeEndian.AppendUint32(b, length)
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = binary.NativeEndian.AppendUint16(b, flags)
	b = binary.NativeEndian.AppendUint32(b, seq)
	return binary.NativeEndian.AppendUint32(b, 0) // port id: the kernel fills in ours
}

func pad(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// Attribute flags.
const (
	Nested       = 1 << 15 // NLA_F_NESTED
	NetByteOrder = 1 << 14 // NLA_F_NET_BYTEORDER
)

// Attr appends one netlink attribute.
func Attr(b []byte, typ uint16, data []byte) []byte {
	b = binary.NativeEndian.AppendUint16(b, uint16(4+len(data)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	return pad(append(b, data...))
}

// Nest appends an attribute holding the attributes fill appends.
func Nest(b []byte, typ uint16, fill func([]byte) []byte) []byte {
	start := len(b)
	b = binary.NativeEndian.AppendUint16(b, 0)
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = fill(b)
	binary.NativeEndian.PutUint16(b[start:], uint16(len(b)-start))
	return b
}

// Attrs calls fn with each attribute in b, its type stripped of the Nested
// and NetByteOrder flags.
func Attrs(b []byte, fn func(typ uint16, val []byte)) {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		if l < 4 || l > len(b) {
			return
		}
		fn(binary.NativeEndian.Uint16(b[2:])&^(Nested|NetByteOrder), b[4:l])
		b = b[min(align(l), len(b)):]
	}
}

// U8, U16, U32 and BE16 encode attribute values.
func U8(v uint8) []byte    { return []byte{v} }
func U16(v uint16) []byte  { return binary.NativeEndian.AppendUint16(nil, v) }
func U32(v uint32) []byte  { return binary.NativeEndian.AppendUint32(nil, v) }
func BE16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// String encodes a NUL-terminated string.
func String(s string) []byte { return append([]byte(s), 0) }
