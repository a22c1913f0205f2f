package framework

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Bed is several kubelet nodes in one VM, made as kind makes its nodes
// in containers: each node is a network namespace (its own IPVS table,
// kube-ipvs0, ipsets, iptables and conntrack), a mount namespace (its own
// /var/lib/kubelet, containerd state and pod logs) and a hostname, with
// its own containerd, kubelet and cgroup root. The nodes hang off one
// bridge in the VM's root namespace, the shared segment: it routes each
// node's pod subnet to that node, as kindnet's routes do, masquerades
// what leaves for QEMU's network (the apiserver), and stands for a client
// outside every node. One VM and namespaces, not a VM per node: under
// emulation three idle VMs cost 0.47 of this machine's two cores against
// 0.18 for one, each node's packets would cross QEMU's emulated NICs, and
// a busy node could not borrow an idle one's CPU (docs/testing.md).
type Bed struct {
	Nodes  []*BedNode
	tunnel *Process
	disk   string // the nodes' directories are under it
}

// BedNode is one node of a Bed.
type BedNode struct {
	Name, Zone string
	IP         netip.Addr   // on the segment; the Node's InternalIP
	PodSubnet  netip.Prefix // routed to IP
	holder     *Process     // keeps the node's namespaces
	containerd *Process
	kubelet    *Process
}

// The segment the nodes share; the VM's root namespace is its gateway.
var (
	SegmentPrefix  = netip.MustParsePrefix("172.18.0.0/16")
	SegmentGateway = netip.MustParseAddr("172.18.0.1")
)

const segmentBridge = "kip-seg"

// BedNodeName is the name of the i-th node (from 0) of a Bed.
func BedNodeName(i int) string { return "kip-node-" + strconv.Itoa(i+1) }

// NetnsPath is where a node's network namespace is named.
func (n *BedNode) NetnsPath() string { return "/run/netns/" + n.Name }

// Command is name and args run inside the node: its network, mount and
// UTS namespaces.
func (n *BedNode) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("nsenter", append([]string{"-t", strconv.Itoa(n.holder.cmd.Process.Pid), "-m", "-u", "-n", "--", name}, args...)...)
}

// StartBed starts count nodes, each in zone zone-a, zone-b, ... in turn
// (zones of one node each, the most the topology tests ask for), with the
// images of hack/node.sh and extra ones imported, and waits until every
// Node is Ready. The apiserver reaches them through e2e/tunnel, which
// dials from the first node, so that Services lead somewhere (webhooks).
func StartBed(e *Env, count int, images ...string) (*Bed, error) {
	root := filepath.Join(NodeDir(), "root")
	if _, err := os.Stat(filepath.Join(root, "usr/bin/containerd")); err != nil {
		return nil, fmt.Errorf("no containerd in %s (make node-e2e runs hack/node.sh): %w", root, err)
	}
	os.Setenv("PATH", filepath.Join(root, "usr/bin")+":"+os.Getenv("PATH"))
	disk, err := setupDisk()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile("/proc/sys/kernel/printk", []byte("1"), 0o644); err != nil {
		return nil, err
	}
	b := &Bed{disk: disk}
	for i := range count {
		b.Nodes = append(b.Nodes, &BedNode{Name: BedNodeName(i), Zone: "zone-" + string(rune('a'+i)),
			IP:        netip.AddrFrom4([4]byte{172, 18, 0, byte(2 + i)}),
			PodSubnet: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(1 + i), 0}), 24)})
	}
	if err := b.setupSegment(); err != nil {
		return nil, err
	}
	if err := enableControllers("/sys/fs/cgroup"); err != nil {
		return nil, err
	}
	for _, n := range b.Nodes {
		if err := b.setupNode(e, n, disk, root); err != nil {
			b.Stop()
			return nil, fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	// Images go into the runtimes at once: most of it is decompression.
	errs := make([]error, len(b.Nodes))
	var wg sync.WaitGroup
	for i, n := range b.Nodes {
		wg.Go(func() { errs[i] = importImages(n.Command(filepath.Join(root, "usr/bin/ctr")), images) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Stop()
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if b.tunnel, err = Start(e, "tunnel", filepath.Join(wd, "bin/tunnel"), "-listen", ":"+TunnelPort,
		"-netns", b.Nodes[0].NetnsPath(), "-allow", SegmentPrefix.String()+","+PodCIDR.String()+",10.96.0.0/16"); err != nil {
		b.Stop()
		return nil, err
	}
	for _, n := range b.Nodes {
		n.kubelet, err = start(e, n.Name+"-kubelet", n.Command(k8sBin("kubelet"), "--config="+n.etc("kubelet.yaml"), "--kubeconfig="+e.Kubeconfig("kubelet-"+n.Name),
			"--node-ip="+n.IP.String(), "--hostname-override="+n.Name,
			"--node-labels=topology.kubernetes.io/zone="+n.Zone, "-v=2"))
		if err != nil {
			b.Stop()
			return nil, err
		}
	}
	for _, n := range b.Nodes {
		if err := Eventually(4*time.Minute, time.Second, func() error { return namedNodeReady(e, n.Name) }); err != nil {
			b.Stop()
			return nil, fmt.Errorf("node %s not Ready (see %s): %w", n.Name, n.kubelet.LogPath, err)
		}
	}
	return b, nil
}

// Stop ends every node's kubelet and containerd, then the namespaces'
// holders and the tunnel; the pods' processes go with the VM.
func (b *Bed) Stop() {
	var all []*Process
	for _, n := range b.Nodes {
		all = append(all, n.kubelet, n.containerd)
	}
	for _, n := range b.Nodes {
		all = append(all, n.holder)
	}
	for _, p := range append(all, b.tunnel) {
		if p != nil {
			_ = p.Stop()
		}
	}
}

// PodLogs are the nodes' /var/log/pods, by pods/NODE, for DumpCluster.
func (b *Bed) PodLogs() map[string]string {
	logs := map[string]string{}
	for _, n := range b.Nodes {
		logs["pods/"+n.Name] = filepath.Join(b.disk, n.Name, "pods")
	}
	return logs
}

// KeepProxierMetrics saves each node's proxier's /metrics (ours and
// kube-proxy both serve it on 127.0.0.1:10249) as metrics-NODE.txt in dir:
// their sync durations say how late each node was, which a run's failures
// are weighed by. The CPU its process and the processes it ran used goes
// to cpu-NODE.txt (see proxierCPU), and the VM's by command to
// cpu-by-command.txt.
func (b *Bed) KeepProxierMetrics(dir string) {
	for _, n := range b.Nodes {
		out, err := n.Command("curl", "-sS", "-m", "20", "http://127.0.0.1:10249/metrics").Output()
		if err != nil {
			out = append(out, []byte("\ncurl: "+err.Error()+"\n")...)
		}
		_ = os.WriteFile(filepath.Join(dir, "metrics-"+n.Name+".txt"), out, 0o644)
		cpu, err := proxierCPU(n.NetnsPath())
		if err != nil {
			cpu = "error: " + err.Error()
		}
		_ = os.WriteFile(filepath.Join(dir, "cpu-"+n.Name+".txt"), []byte(cpu+"\n"), 0o644)
	}
	_ = os.WriteFile(filepath.Join(dir, "cpu-by-command.txt"), []byte(cpuByCommand()), 0o644)
}

// setupSegment makes the bridge every node hangs off, routes each pod
// subnet to its node, and masquerades what leaves for QEMU's network.
func (b *Bed) setupSegment() error {
	gw := netip.PrefixFrom(SegmentGateway, SegmentPrefix.Bits()).String()
	steps := [][]string{
		{"ip", "link", "add", segmentBridge, "type", "bridge"},
		{"ip", "addr", "add", gw, "dev", segmentBridge},
		{"ip", "link", "set", segmentBridge, "up"},
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		// The conntrack table's size is the VM's, and only the VM's root
		// namespace may set it: sized here, as a node image would size it,
		// neither proxier needs to (kind sets conntrack.maxPerCore 0).
		{"modprobe", "nf_conntrack"},
		{"sysctl", "-qw", "net.netfilter.nf_conntrack_max=262144"},
		{"iptables", "-t", "nat", "-A", "POSTROUTING", "-s", SegmentPrefix.String(), "-o", "eth0", "-j", "MASQUERADE"},
		{"iptables", "-t", "nat", "-A", "POSTROUTING", "-s", PodCIDR.String(), "-o", "eth0", "-j", "MASQUERADE"},
	}
	for _, n := range b.Nodes {
		steps = append(steps, []string{"ip", "route", "add", n.PodSubnet.String(), "via", n.IP.String()})
	}
	return run(steps)
}

// setupNode makes n's network namespace, wired to the segment and routing
// the other nodes' pod subnets to them; its holder process, which mounts
// the node's own directories in a mount namespace of its own; its
// configuration; and its containerd.
func (b *Bed) setupNode(e *Env, n *BedNode, disk, root string) error {
	ns, veth := n.Name, "veth-"+n.Name
	in := func(args ...string) []string { return append([]string{"ip", "netns", "exec", ns}, args...) }
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "link", "set", veth, "master", segmentBridge, "up"},
		in("ip", "addr", "add", netip.PrefixFrom(n.IP, SegmentPrefix.Bits()).String(), "dev", "eth0"),
		in("ip", "link", "set", "lo", "up"),
		in("ip", "link", "set", "eth0", "up"),
		in("ip", "route", "add", "default", "via", SegmentGateway.String()),
		in("sysctl", "-qw", "net.ipv4.ip_forward=1"),
		// The pods' traffic to anything outside the pod network leaves
		// as the node's; between pods it keeps its source (NoSNAT).
		in("iptables", "-t", "nat", "-A", "POSTROUTING", "-s", n.PodSubnet.String(), "!", "-d", PodCIDR.String(), "-j", "MASQUERADE"),
	}
	for _, o := range b.Nodes {
		if o != n {
			steps = append(steps, in("ip", "route", "add", o.PodSubnet.String(), "via", o.IP.String()))
		}
	}
	if err := run(steps); err != nil {
		return err
	}
	// The node's cgroup root: kubelet puts its pods under it. It holds no
	// process, as cgroup v2 wants of a parent with controllers enabled.
	cg := filepath.Join("/sys/fs/cgroup", n.Name)
	if err := os.MkdirAll(cg, 0o755); err != nil {
		return err
	}
	if err := enableControllers(cg); err != nil {
		return err
	}
	ready := filepath.Join("/run/kip-bed", n.Name+".ready")
	if err := os.MkdirAll(filepath.Dir(ready), 0o755); err != nil {
		return err
	}
	var script strings.Builder
	// ip netns exec gave the holder a mount namespace, /sys of the node's
	// network namespace, and / as a slave of the VM's: mounts made here
	// stay here, and are shared with the node's containers.
	script.WriteString("set -e\nmount --make-rshared /\nmount -t cgroup2 none /sys/fs/cgroup\n")
	for _, d := range []string{"/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods", "/var/log/containers"} {
		part := filepath.Join(disk, n.Name, filepath.Base(d))
		fmt.Fprintf(&script, "mkdir -p %s %s\nmount --bind %s %s\n", part, d, part, d)
	}
	// Each node its own xtables lock, as each kind node has its own /run:
	// shared, every node's proxiers would queue for one lock.
	lock := filepath.Join("/run/kip-bed", n.Name+".xtables.lock")
	fmt.Fprintf(&script, "touch /run/xtables.lock %s\nmount --bind %s /run/xtables.lock\n", lock, lock)
	fmt.Fprintf(&script, "mkdir -p /run/containerd\nmount -t tmpfs tmpfs /run/containerd\nhostname %s\ntouch %s\nexec sleep infinity\n", n.Name, ready)
	var err error
	if n.holder, err = Start(e, n.Name+"-holder", "ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c", script.String()); err != nil {
		return err
	}
	if err := Eventually(30*time.Second, 100*time.Millisecond, func() error { _, err := os.Stat(ready); return err }); err != nil {
		return fmt.Errorf("the namespaces' holder did not come up (see %s): %w", n.holder.LogPath, err)
	}
	if err := writeFiles(map[string]string{
		n.etc("cni/10-kip.conflist"): fmt.Sprintf(cniConfig, false, n.PodSubnet),
		n.etc("containerd.toml"):     fmt.Sprintf(containerdConfig, root, n.etc("cni"), root),
		n.etc("kubelet.yaml"):        fmt.Sprintf(kubeletConfig, DNSIP, "/"+n.Name),
	}); err != nil {
		return err
	}
	if n.containerd, err = start(e, n.Name+"-containerd",
		n.Command(filepath.Join(root, "usr/bin/containerd"), "--config", n.etc("containerd.toml"))); err != nil {
		return err
	}
	return Eventually(30*time.Second, 200*time.Millisecond, func() error {
		return n.Command(filepath.Join(root, "usr/bin/ctr"), "version").Run()
	})
}

// etc is the path of the node's configuration file name.
func (n *BedNode) etc(name string) string { return filepath.Join("/etc/kip-bed", n.Name, name) }

// enableControllers lets the children of the cgroup dir use every
// controller it has.
func enableControllers(dir string) error {
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return err
	}
	var want []string
	for _, c := range strings.Fields(string(have)) {
		want = append(want, "+"+c)
	}
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(want, " ")), 0o644)
}

func run(steps [][]string) error {
	for _, s := range steps {
		if err := sh(s...); err != nil {
			return err
		}
	}
	return nil
}

// Client is a client on the node itself: its sockets live in the node's
// network namespace, as a host-network process's do.
func (n *BedNode) Client() *Pod { return &Pod{Name: n.Name, IP: n.IP, ns: n.Name} }

// OutsideGet sends one HTTP GET from the segment's gateway, a client
// outside every node, and returns the body.
func OutsideGet(to netip.AddrPort, path string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("tcp", to.String(), timeout)
	if err != nil {
		return "", err
	}
	return get(c, path, timeout)
}
