// Command tunnel runs in the VM beside a real node and carries the
// apiserver's connections into it: kube-apiserver (on the host) dials
// through it as its "cluster" egress (an HTTP CONNECT proxy, reached by a
// QEMU port forward), for kubectl exec, logs and port-forward to the
// kubelet and for its proxy to pods and Services. Only addresses inside the
// VM are dialled. With -netns it dials from that network namespace, as a
// node of e2e/multinode would: there a Service's cluster IP leads somewhere.
//
//	tunnel -listen :8132 -allow 10.0.2.15/32,10.244.0.0/16,10.96.0.0/16 [-netns /run/netns/NAME]
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
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netns"
)

func main() {
	listen := flag.String("listen", ":8132", "address to accept CONNECT requests on")
	allow := flag.String("allow", "", "comma-separated prefixes a CONNECT may reach")
	ns := flag.String("netns", "", "network namespace (a path) to dial from; the listener stays in the tunnel's own")
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
		go serve(c, prefixes, *ns)
	}
}

// serve answers one CONNECT and then copies bytes both ways.
func serve(c net.Conn, allowed []netip.Prefix, ns string) {
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
	up, err := dialFrom(ns, to.String())
	if err != nil {
		// The reason reaches the apiserver's error, and so the test's.
		log.Printf("CONNECT %s: %v", req.Host, err)
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway (%s)\r\n\r\n", strings.ReplaceAll(err.Error(), "\n", " "))
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

// dialFrom dials to from the network namespace at path ns ("" for the
// tunnel's own). The socket is made on a thread moved into ns, which
// moves back; a thread that cannot is left locked, so it dies with the
// goroutine instead of serving others from the wrong namespace.
func dialFrom(ns, to string) (net.Conn, error) {
	if ns == "" {
		return net.DialTimeout("tcp", to, 10*time.Second)
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer orig.Close()
	target, err := netns.GetFromPath(ns)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	c, err := net.DialTimeout("tcp", to, 10*time.Second)
	if netns.Set(orig) == nil {
		runtime.UnlockOSThread()
	}
	return c, err
}
