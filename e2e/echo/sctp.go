package main

import (
	"log"

	"golang.org/x/sys/unix"
)

// serveSCTP answers every SCTP association on port with name, then closes
// it. Go's net package has no SCTP; a one-to-one style socket behaves as a
// TCP one under the plain socket calls.
func serveSCTP(port int, name string) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
	if err != nil {
		log.Printf("no SCTP (%v); serving TCP and UDP only", err)
		return
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port}); err != nil {
		log.Fatalf("sctp bind: %v", err)
	}
	if err := unix.Listen(fd, 64); err != nil {
		log.Fatalf("sctp listen: %v", err)
	}
	go func() {
		for {
			c, _, err := unix.Accept(fd)
			if err != nil {
				log.Printf("sctp accept: %v", err)
				continue
			}
			go func() {
				defer unix.Close(c)
				buf := make([]byte, 256)
				if _, err := unix.Read(c, buf); err == nil {
					_, _ = unix.Write(c, []byte(name))
				}
			}()
		}
	}()
}
