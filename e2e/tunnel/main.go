// Command tunnel runs in the VM beside a real node and carries the
// apiserver's connections into it: kube-apiserver (on the host) dials
// through it as its "cluster" egress (an HTTP CONNECT proxy, reached by a
// QEMU port forward), for kubectl exec, logs and port-forward to the
// kubelet and for its proxy to pods and Services. Only addresses inside the
// VM are dialled.
//
//	tunnel -listen :8132 -allow 10.0.2.15/32,10.244.0.0/16,10.96.0.0/16
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

func main() {
	listen := flag.String("listen", ":8132", "address to accept CONNECT requests on")
	allow := flag.String("allow", "", "comma-separated prefixes a CONNECT may reach")
	flag.Parse()
	var prefixes []netip.Prefix
	for _, s := range strings.Split(*allow, ",") {
		if s = strings.TrimSpace(s); s != "" {
			prefixes = append(prefixes, netip.MustParsePrefix(s))
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("ready")
	for {
		c, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go serve(c, prefixes)
	}
}

// serve answers one CONNECT and then copies bytes both ways.
func serve(c net.Conn, allowed []netip.Prefix) {
	defer c.Close()
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		fmt.Fprint(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	to, err := netip.ParseAddrPort(req.Host)
	if err != nil || !inside(to.Addr(), allowed) {
		log.Printf("refused CONNECT %s", req.Host)
		fmt.Fprint(c, "HTTP/1.1 403 Forbidden\r\n\r\n")
		return
	}
	up, err := net.DialTimeout("tcp", to.String(), 10*time.Second)
	if err != nil {
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
		return
	}
	defer up.Close()
	fmt.Fprint(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

func inside(a netip.Addr, allowed []netip.Prefix) bool {
	for _, p := range allowed {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
