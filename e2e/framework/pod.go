package framework

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Pod is a network namespace with a veth link to the root namespace and,
// optionally, an echo server answering with the pod's name.
type Pod struct {
	Name string
	IP   netip.Addr
	IP6  netip.Addr // see AddIPv6
	ns   string
	host string // veth end in the root namespace
	srv  *exec.Cmd
}

func sh(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// PodCIDR holds the addresses of pods; other namespaces stand for hosts
// outside the cluster. Their links in the root namespace are named
// PodLinkPrefix… and HostPrefix…, so that --detect-local-mode=
// InterfaceNamePrefix tells them apart.
var PodCIDR = netip.MustParsePrefix("10.244.0.0/16")

const (
	PodLinkPrefix = "kv"
	HostPrefix    = "kx"
)

// Gateway is every pod's next hop, a link-local address the root namespace
// answers for on each pod's link, as Calico does: a pod never ARPs for a
// Service or node address itself, so --ipvs-strict-arp leaves it working.
const Gateway = "169.254.1.1"

// StartPod creates the pod. Addresses are /32 routes through the root
// namespace (no bridge), like a routed CNI plugin.
func StartPod(e *Env, name string, ip netip.Addr, serve bool) (*Pod, error) {
	b := ip.As4()
	prefix := HostPrefix // outside the cluster
	if PodCIDR.Contains(ip) {
		prefix = PodLinkPrefix
	}
	p := &Pod{Name: name, IP: ip, ns: "pod-" + name, host: fmt.Sprintf("%s%02x%02x%02x", prefix, b[1], b[2], b[3])}
	steps := [][]string{
		{"ip", "netns", "add", p.ns},
		{"ip", "link", "add", p.host, "type", "veth", "peer", "name", "eth0", "netns", p.ns},
		{"ip", "-n", p.ns, "link", "set", "lo", "up"},
		{"ip", "-n", p.ns, "addr", "add", ip.String() + "/32", "dev", "eth0"},
		{"ip", "-n", p.ns, "link", "set", "eth0", "up"},
		{"ip", "link", "set", p.host, "up"},
		{"ip", "route", "add", ip.String() + "/32", "dev", p.host},
	}
	for _, s := range steps {
		if err := sh(s...); err != nil {
			p.Delete()
			return nil, err
		}
	}
	mac, err := os.ReadFile("/sys/class/net/" + p.host + "/address")
	if err == nil {
		err = p.IPCommand("neigh", "add", Gateway, "lladdr", strings.TrimSpace(string(mac)), "dev", "eth0", "nud", "permanent")
	}
	for _, s := range [][]string{{"route", "add", Gateway, "dev", "eth0", "scope", "link"}, {"route", "add", "default", "via", Gateway, "dev", "eth0"}} {
		if err == nil {
			err = p.IPCommand(s...)
		}
	}
	if err != nil {
		p.Delete()
		return nil, err
	}
	if !serve {
		return p, nil
	}
	log, err := os.Create(filepath.Join(e.Artifacts, "pod-"+name+".log"))
	if err != nil {
		p.Delete()
		return nil, err
	}
	p.srv = exec.Command("ip", "netns", "exec", p.ns, filepath.Join(e.Bin, "echo"), "-name", name)
	p.srv.Stderr = log
	out, _ := p.srv.StdoutPipe()
	if err := p.srv.Start(); err != nil {
		p.Delete()
		return nil, err
	}
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- strings.TrimSpace(line) == "ready"
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-ready:
		if !ok {
			p.Delete()
			return nil, fmt.Errorf("pod %s: echo server did not start", name)
		}
	case <-time.After(30 * time.Second):
		p.Delete()
		return nil, fmt.Errorf("pod %s: echo server not ready after 30s", name)
	}
	return p, nil
}

// Gateway6 is every pod's IPv6 next hop, on each pod's link in the root
// namespace, the way Gateway is for IPv4.
const Gateway6 = "fe80::1"

// AddIPv6 gives the pod a second address, IPv6, as a dual-stack CNI plugin
// does: a /128 route through the root namespace, which forwards IPv6 (the
// CNI plugin's job, not the proxy's). Without DAD, so it is usable at once.
func (p *Pod) AddIPv6(ip netip.Addr) error {
	if err := os.WriteFile("/proc/sys/net/ipv6/conf/all/forwarding", []byte("1"), 0o644); err != nil {
		return err
	}
	mac, err := os.ReadFile("/sys/class/net/" + p.host + "/address")
	if err != nil {
		return err
	}
	steps := [][]string{
		{"ip", "addr", "add", Gateway6 + "/64", "dev", p.host, "nodad"},
		{"ip", "-n", p.ns, "addr", "add", ip.String() + "/128", "dev", "eth0", "nodad"},
		{"ip", "-n", p.ns, "neigh", "add", Gateway6, "lladdr", strings.TrimSpace(string(mac)), "dev", "eth0", "nud", "permanent"},
		{"ip", "-n", p.ns, "-6", "route", "add", "default", "via", Gateway6, "dev", "eth0"},
		{"ip", "-6", "route", "add", ip.String() + "/128", "dev", p.host},
	}
	for _, s := range steps {
		if err := sh(s...); err != nil {
			return err
		}
	}
	p.IP6 = ip
	return nil
}

// IPCommand runs the ip command in the pod's namespace: IPCommand("route", "show").
func (p *Pod) IPCommand(args ...string) error {
	return sh(append([]string{"ip", "-n", p.ns}, args...)...)
}

// Delete stops the server and removes the namespace and links.
func (p *Pod) Delete() {
	if p.srv != nil && p.srv.Process != nil {
		_ = p.srv.Process.Kill()
		_ = p.srv.Wait()
	}
	_ = sh("ip", "link", "del", p.host)
	_ = sh("ip", "netns", "del", p.ns)
}

// dial opens a connection whose socket lives in the pod's namespace.
func (p *Pod) dial(network string, to netip.AddrPort, timeout time.Duration) (c net.Conn, err error) {
	err = p.in(func() error {
		d := net.Dialer{Timeout: timeout}
		for range 3 {
			if network == "tcp" {
				d.LocalAddr = &net.TCPAddr{Port: nextTCPPort()}
			}
			if c, err = d.Dial(network, to.String()); !errors.Is(err, unix.EADDRINUSE) {
				break
			}
		}
		return err
	})
	return c, err
}

// tcpPorts hands out the clients' TCP source ports in turn, from a range
// wider than the kernel's ephemeral one, so that no port comes back to a
// Service within minutes. The kernel may give a client a port it used to
// the same Service seconds ago, whose connection IPVS still holds in
// TIME_WAIT (two minutes); to a Service with ClientIP affinity such a
// connection went unanswered for 5 s about 3 times in 10,000 in the VM,
// with either proxier running steadily (docs/migration.md). The client
// loops measure a switch, not that.
var tcpPorts atomic.Uint32

// A client on a node (BedNode.Client) shares the node's ports: the range
// skips the node agents' (kubelet's 10248 and 10250, the proxiers' 10249 and
// 10256, ...) and the NodePorts.
func nextTCPPort() int {
	for {
		p := 10000 + int(tcpPorts.Add(1)%50000)
		if p >= 10240 && p < 10270 || p >= 30000 && p < 32768 {
			continue
		}
		return p
	}
}

// in runs fn on a thread inside the pod's namespace: the sockets fn
// creates live there.
func (p *Pod) in(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := netns.GetFromName(p.ns)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return err
	}
	defer func() { _ = netns.Set(orig) }()
	return fn()
}

// HTTP sends one request on a new TCP connection and returns the answering pod's name.
func (p *Pod) HTTP(to netip.AddrPort, timeout time.Duration) (string, error) {
	return p.Get(to, "/", timeout)
}

// Source asks who answers and from which address it sees the request come:
// "name address".
func (p *Pod) Source(to netip.AddrPort, timeout time.Duration) (string, error) {
	return p.Get(to, "/source", timeout)
}

// HostLink is the pod's veth end in the root namespace.
func (p *Pod) HostLink() string { return p.host }

// Get sends one HTTP GET on a new TCP connection and returns the body.
func (p *Pod) Get(to netip.AddrPort, path string, timeout time.Duration) (string, error) {
	c, err := p.dial("tcp", to, timeout)
	if err != nil {
		return "", err
	}
	return get(c, path, timeout)
}

// NodeHTTP sends one request from the node itself (the root namespace) and
// returns the answering pod's name.
func NodeHTTP(to netip.AddrPort, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", to.String(), timeout)
	if err != nil {
		return "", err
	}
	return get(c, "/", timeout)
}

// get sends one HTTP GET on c, closes it, and returns the body.
func get(c net.Conn, path string, timeout time.Duration) (string, error) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.0\r\nHost: test\r\n\r\n"); err != nil {
		return "", err
	}
	body, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	_, payload, ok := strings.Cut(string(body), "\r\n\r\n")
	if !ok {
		return "", fmt.Errorf("malformed HTTP answer %q", body)
	}
	return payload, nil
}

// UDP sends one datagram from a new socket and returns the answering pod's name.
func (p *Pod) UDP(to netip.AddrPort, timeout time.Duration) (string, error) {
	c, err := p.UDPSocket(to)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return Ask(c, timeout)
}

// UDPSocket opens a UDP socket to `to` whose datagrams all leave from the
// same source port: one flow, as a resolver's.
func (p *Pod) UDPSocket(to netip.AddrPort) (net.Conn, error) {
	return p.dial("udp", to, time.Second)
}

// Ask sends one datagram on c and returns the answering pod's name.
func Ask(c net.Conn, timeout time.Duration) (string, error) {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("who")); err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// Conn is one TCP connection from a pod kept open across HTTP requests
// (keep-alive): a long-lived connection through a Service.
type Conn struct {
	c net.Conn
	r *bufio.Reader
}

// KeepAlive opens a long-lived connection to `to`.
func (p *Pod) KeepAlive(to netip.AddrPort, timeout time.Duration) (*Conn, error) {
	c, err := p.dial("tcp", to, timeout)
	if err != nil {
		return nil, err
	}
	return &Conn{c: c, r: bufio.NewReader(c)}, nil
}

// Get sends one request on the connection and returns the body.
func (c *Conn) Get(path string, timeout time.Duration) (string, error) {
	_ = c.c.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(c.c, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", path); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// Reset closes the connection with a RST: IPVS then forgets it within
// seconds, where a graceful close would count in TIME_WAIT for two minutes.
func (c *Conn) Reset() {
	if tc, ok := c.c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.c.Close()
}

// SCTP opens an SCTP association to `to` from the pod, sends one message
// and returns the answering pod's name.
func (p *Pod) SCTP(to netip.AddrPort, timeout time.Duration) (string, error) {
	fd, err := p.socket(unix.AF_INET, unix.SOCK_STREAM, unix.IPPROTO_SCTP)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	for _, opt := range []int{unix.SO_SNDTIMEO, unix.SO_RCVTIMEO} {
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			return "", err
		}
	}
	// A socket with a timeout is not restarted after a signal (the Go
	// runtime's preemption): an interrupted connect goes on in the kernel,
	// and is waited for; an interrupted send or receive is repeated.
	deadline := time.Now().Add(timeout)
	err = unix.Connect(fd, &unix.SockaddrInet4{Addr: to.Addr().As4(), Port: int(to.Port())})
	if err == unix.EINTR {
		err = awaitConnect(fd, deadline)
	}
	if err != nil {
		return "", fmt.Errorf("sctp connect %s: %w", to, err)
	}
	if _, err := retryEINTR(func() (int, error) { return unix.Write(fd, []byte("who")) }); err != nil {
		return "", fmt.Errorf("sctp send: %w", err)
	}
	buf := make([]byte, 256)
	n, err := retryEINTR(func() (int, error) { return unix.Read(fd, buf) })
	if err != nil {
		return "", fmt.Errorf("sctp receive: %w", err)
	}
	return string(buf[:n]), nil
}

// awaitConnect waits until deadline for a connect under way on fd to end,
// and returns its outcome.
func awaitConnect(fd int, deadline time.Time) error {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIMEDOUT
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}, int(left.Milliseconds())+1)
		if err == unix.EINTR || (err == nil && n == 0) {
			continue
		}
		if err != nil {
			return err
		}
		if errno, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR); err != nil || errno != 0 {
			if err != nil {
				return err
			}
			return unix.Errno(errno)
		}
		return nil
	}
}

// retryEINTR repeats a send or receive a signal interrupted before it
// moved any data.
func retryEINTR(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if err != unix.EINTR {
			return n, err
		}
	}
}

// socket creates a socket in the pod's namespace.
func (p *Pod) socket(domain, typ, proto int) (fd int, err error) {
	err = p.in(func() error {
		fd, err = unix.Socket(domain, typ, proto)
		return err
	})
	return fd, err
}
