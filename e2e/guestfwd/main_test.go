package main

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
)

// tcpPair returns both ends of a loopback TCP connection, as QEMU hands
// guestfwd its end.
func tcpPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialed, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	accepted, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dialed.Close(); accepted.Close() })
	return dialed.(*net.TCPConn), accepted.(*net.TCPConn)
}

func TestForwardCarriesBothWaysAndHalfCloses(t *testing.T) {
	// The host side: answers each line in upper case, then says "bye" when
	// the guest has closed its sending side.
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go func() {
		c, err := host.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			_, _ = io.WriteString(c, strings.ToUpper(sc.Text())+"\n")
		}
		_, _ = io.WriteString(c, "bye\n")
	}()

	qemu, ours := tcpPair(t)
	done := make(chan error, 1)
	go func() { done <- forward(ours, host.Addr().String()) }()

	// Two small writes in a row: the pattern that used to stall.
	for _, w := range []string{"headers\n", "data\n"} {
		if _, err := io.WriteString(qemu, w); err != nil {
			t.Fatal(err)
		}
	}
	if err := qemu.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(qemu)
	if err != nil {
		t.Fatal(err)
	}
	if want := "HEADERS\nDATA\nbye\n"; string(got) != want {
		t.Fatalf("guest read %q, want %q", got, want)
	}
	if err := <-done; err != nil {
		t.Fatalf("forward: %v", err)
	}
}

func TestForwardReportsAnUnreachableHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, ours := tcpPair(t)
	if err := forward(ours, addr); err == nil {
		t.Fatal("forward to a closed port succeeded")
	}
}
