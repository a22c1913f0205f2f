// Command echo is the test pods' server: it answers every HTTP request on
// -tcp, every UDP datagram on -udp and every SCTP association on -sctp with
// its pod name, so a client can tell which endpoint served it; /source adds
// the client's address.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
)

func main() {
	name := flag.String("name", "", "pod name to answer with")
	tcp := flag.String("tcp", ":8080", "HTTP listen address")
	udp := flag.String("udp", ":5353", "UDP listen address")
	sctp := flag.Int("sctp", 9009, "SCTP listen port")
	flag.Parse()
	if *name == "" {
		fmt.Fprintln(os.Stderr, "echo: -name is required")
		os.Exit(2)
	}
	pc, err := net.ListenPacket("udp", *udp)
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				log.Fatal(err)
			}
			_, _ = pc.WriteTo([]byte(*name), from)
		}
	}()
	serveSCTP(*sctp, *name)
	ln, err := net.Listen("tcp", *tcp)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready")
	log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /source adds the client's address as the pod sees it, to tell
		// a masqueraded connection from one that kept its source.
		if r.URL.Path == "/source" {
			host, _, _ := net.SplitHostPort(r.RemoteAddr)
			_, _ = w.Write([]byte(*name + " " + host))
			return
		}
		_, _ = w.Write([]byte(*name))
	})))
}
