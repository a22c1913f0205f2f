// Command guestfwd carries one connection from the test VM to a TCP address
// on the host. hack/vm.sh has QEMU's user-mode network start it for each
// guest connection to the apiserver's address (guestfwd=…-cmd:), with QEMU's
// end of a loopback TCP connection as its standard input and output.
//
// It replaces socat for one reason: QEMU's end of that connection sends with
// Nagle's algorithm on, and a receiver that delays its ACKs (the kernel's
// default, 40 ms) holds back every second small segment. An HTTP/2 request
// with a body is two segments (HEADERS, then DATA), so every API write from
// the VM waited 40 ms for nothing. Acknowledging each read at once
// (TCP_QUICKACK) and sending without delay (TCP_NODELAY) removes that stall,
// which a real node, with no QEMU in the path, does not have.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: guestfwd HOST:PORT (stdin and stdout: a TCP connection)")
		os.Exit(2)
	}
	c, err := net.FileConn(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "guestfwd: stdin:", err)
		os.Exit(1)
	}
	guest, ok := c.(*net.TCPConn)
	if !ok {
		fmt.Fprintf(os.Stderr, "guestfwd: stdin is a %T, not a TCP connection\n", c)
		os.Exit(1)
	}
	// Silent on failure: QEMU gives this process the guest's connection as
	// its standard error too, so an error message would reach the guest's
	// TLS client as if the apiserver had sent it.
	if err := forward(guest, os.Args[1]); err != nil {
		os.Exit(1)
	}
}

// forward copies between guest and a new connection to addr until both
// directions have ended, passing each end-of-stream on as a half close.
func forward(guest *net.TCPConn, addr string) error {
	if err := guest.SetNoDelay(true); err != nil {
		return err
	}
	host, err := net.Dial("tcp", addr) // TCP_NODELAY by Go's default
	if err != nil {
		return err
	}
	toHost := make(chan error, 1)
	go func() {
		err := copyAcking(host, guest)
		_ = host.(*net.TCPConn).CloseWrite()
		toHost <- err
	}()
	_, errBack := io.Copy(guest, host)
	_ = guest.CloseWrite()
	return errors.Join(<-toHost, errBack)
}

// copyAcking copies from src to dst, asking the kernel after each read to
// acknowledge src's data at once rather than after the delayed-ACK timer.
// Quick-ack mode does not last (the kernel returns to delayed ACKs once the
// traffic looks interactive), so it is set again after every read.
func copyAcking(dst io.Writer, src *net.TCPConn) error {
	raw, err := src.SyscallConn()
	if err != nil {
		return err
	}
	quickAck := func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if cerr := raw.Control(quickAck); cerr != nil {
				return cerr
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
