package framework

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node is a real kubelet node in the VM: containerd and runc (Debian's
// packages, unpacked by hack/node.sh), the CNI bridge plugin, and kubelet
// registering as NodeName with the apiserver of testcluster -controllers.
type Node struct {
	containerd, kubelet, tunnel *Process
}

// TunnelPort is where e2e/tunnel takes the apiserver's connections to the
// node (testcluster -controllers, hack/vm.sh -p).
const TunnelPort = "8132"

// NodeDir is what hack/node.sh prepared: root/ (the unpacked packages) and
// images/ (the OCI archives every pod runs from).
func NodeDir() string { return filepath.Join(os.Getenv("KIP_CACHE"), "node") }

// The pod network: one bridge, host-local addresses, routed by the node.
const (
	PodSubnet = "10.244.0.0/24"
	NodeIP    = "10.0.2.15"
	DNSIP     = "10.96.0.10"
)

// StartNode starts containerd, imports the images (the test images and
// extra archives such as the proxier's), starts kubelet and waits until
// the Node is Ready. Its state lives on a fresh disk (setupNodeFS).
func StartNode(e *Env, images ...string) (*Node, error) {
	root := filepath.Join(NodeDir(), "root")
	if _, err := os.Stat(filepath.Join(root, "usr/bin/containerd")); err != nil {
		return nil, fmt.Errorf("no containerd in %s (make node-e2e runs hack/node.sh): %w", root, err)
	}
	os.Setenv("PATH", filepath.Join(root, "usr/bin")+":"+os.Getenv("PATH")) // containerd finds its shim there
	if err := setupNodeFS(); err != nil {
		return nil, err
	}
	// IPVS logs each packet to a Service without endpoints; keep the
	// kernel's messages in dmesg, off the console the tests report on.
	if err := os.WriteFile("/proc/sys/kernel/printk", []byte("1"), 0o644); err != nil {
		return nil, err
	}
	if err := writeFiles(map[string]string{
		"/etc/cni/net.d/10-kip.conflist": fmt.Sprintf(cniConfig, true, PodSubnet),
		"/etc/containerd/config.toml":    fmt.Sprintf(containerdConfig, root, "/etc/cni/net.d", root),
		"/etc/kip-node/kubelet.yaml":     fmt.Sprintf(kubeletConfig, DNSIP, "/"),
	}); err != nil {
		return nil, err
	}
	n := &Node{}
	var err error
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	if n.tunnel, err = Start(e, "tunnel", filepath.Join(wd, "bin/tunnel"), "-listen", ":"+TunnelPort,
		"-allow", NodeIP+"/32,"+PodCIDR.String()+",10.96.0.0/16"); err != nil {
		return nil, err
	}
	if n.containerd, err = Start(e, "containerd", filepath.Join(root, "usr/bin/containerd")); err != nil {
		n.Stop()
		return nil, err
	}
	ctr := filepath.Join(root, "usr/bin/ctr")
	if err := Eventually(30*time.Second, 200*time.Millisecond, func() error {
		return exec.Command(ctr, "version").Run()
	}); err != nil {
		n.Stop()
		return nil, fmt.Errorf("containerd did not start (see %s): %w", n.containerd.LogPath, err)
	}
	if err := importImages(exec.Command(ctr), images); err != nil {
		n.Stop()
		return nil, err
	}
	n.kubelet, err = Start(e, "kubelet", k8sBin("kubelet"), "--config=/etc/kip-node/kubelet.yaml",
		"--kubeconfig="+e.Kubeconfig("kubelet"), "--node-ip="+NodeIP, "--hostname-override="+NodeName, "-v=2")
	if err != nil {
		n.Stop()
		return nil, err
	}
	if err := Eventually(3*time.Minute, time.Second, func() error { return nodeReady(e) }); err != nil {
		n.Stop()
		return nil, fmt.Errorf("node not Ready (see %s): %w", n.kubelet.LogPath, err)
	}
	return n, nil
}

// Stop ends kubelet, containerd and the tunnel; the pods' processes go
// with the VM.
func (n *Node) Stop() {
	for _, p := range []*Process{n.kubelet, n.containerd, n.tunnel} {
		if p != nil {
			_ = p.Stop()
		}
	}
}

// writeFiles writes each file, making its directory.
func writeFiles(files map[string]string) error {
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// importImages imports hack/node.sh's archives and extra ones into the
// runtime that ctr (a command without arguments yet) talks to.
func importImages(ctr *exec.Cmd, extra []string) error {
	archives, _ := filepath.Glob(filepath.Join(NodeDir(), "images", "*.tar"))
	for _, a := range append(archives, extra...) {
		cmd := exec.Command(ctr.Path, append(ctr.Args[1:], "-n", "k8s.io", "images", "import", a)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("import %s: %w: %s", a, err, out)
		}
	}
	return nil
}

func nodeReady(e *Env) error { return namedNodeReady(e, NodeName) }

func namedNodeReady(e *Env, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := e.Admin.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			if c.Status == v1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s %s: %s", name, c.Reason, c.Message)
		}
	}
	return errors.New("node has no Ready condition yet")
}

// setupNodeFS mounts cgroup v2 and the disk the runtime and kubelet keep
// their state on, and makes every mount shared, as systemd does on a node:
// otherwise a pod's network namespace, bind-mounted under /run/netns, stays
// mounted in copies and cannot be removed when the pod ends. The disk is
// ext4 on a loop device, not tmpfs: kubelet's ephemeral-storage accounting
// (and the eviction a Services test relies on) needs a block-backed
// filesystem, and overlayfs, the snapshotter's, cannot use the VM's
// overlay root as its upper layer.
func setupNodeFS() error {
	disk, err := setupDisk()
	if err != nil {
		return err
	}
	for _, d := range []string{"/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"} {
		part := filepath.Join(disk, filepath.Base(d))
		if err := os.MkdirAll(part, 0o755); err != nil {
			return err
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		if err := sh("mount", "--bind", part, d); err != nil {
			return err
		}
	}
	return nil
}

// setupDisk makes every mount shared, mounts cgroup v2 and the node's
// ext4 disk, and returns the disk's mount point.
func setupDisk() (string, error) {
	if err := sh("mount", "--make-rshared", "/"); err != nil {
		return "", err
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		if err := sh("mount", "-t", "cgroup2", "none", "/sys/fs/cgroup"); err != nil {
			return "", err
		}
	}
	const disk, img = "/var/lib/kip-node", "/tmp/kip-node.ext4"
	for _, step := range [][]string{
		{"modprobe", "-a", "loop", "ext4"},
		{"truncate", "-s", "8G", img},
		{"mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=1,lazy_journal_init=1", img},
		{"mkdir", "-p", disk},
		{"mount", "-o", "loop", img, disk},
	} {
		if err := sh(step...); err != nil {
			return "", err
		}
	}
	return disk, nil
}

// cniConfig: pods on the bridge cni0, the node their gateway; hairpin
// mode lets a pod reach itself through a Service. On one node, traffic
// leaving the pod subnet is masqueraded (ipMasq), as most CNI set-ups do:
// the apiserver the kubernetes Service leads to (through QEMU's user
// network) has no route back to pods. The nodes of a Bed masquerade
// only what leaves the whole pod network, as kind's kindnet does. The
// portmap plugin gives pods their hostPorts, as kindnet's chain does.
const cniConfig = `{"cniVersion": "0.4.0", "name": "kip", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": %t, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
`

// containerdConfig: the CRI plugin with the pause image hack/node.sh
// builds, the CNI plugins and runc from the unpacked packages, and the
// cgroupfs driver (no systemd in the VM).
const containerdConfig = `version = 2
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10"
[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "%s/usr/lib/cni"
  conf_dir = %q
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  BinaryName = "%s/usr/sbin/runc"
  SystemdCgroup = false
`

// kubeletConfig: no image is ever pulled or collected (they were imported
// and cannot be pulled again), eviction only in real need, no swap check,
// and the API of the kubelet open only inside the VM. Each node of a Bed
// has a cgroup root of its own.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
clusterDNS: [%s]
clusterDomain: cluster.local
failSwapOn: false
resolvConf: ""
readOnlyPort: 0
evictionHard: {memory.available: 10Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
cgroupRoot: %s
`

// k8sBin is a binary of hack/k8s-bins.sh, read from its cache in place
// (Env.KBin holds the staged copies of a few).
func k8sBin(name string) string { return filepath.Join(os.Getenv("KBIN"), name) }

// Kubectl runs kubectl as the admin, inside the VM, and returns its output.
func (e *Env) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(k8sBin("kubectl"), append([]string{"--kubeconfig", e.Kubeconfig("admin")}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Script runs a shell script as an operator at a terminal would: sh -eu
// with kubectl on the PATH and the admin's kubeconfig, and env (NAME=value)
// besides. It returns the script's output.
func (e *Env) Script(script string, env ...string) (string, error) {
	cmd := exec.Command("sh", "-eu", "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(k8sBin("kubectl"))+":"+os.Getenv("PATH"), "KUBECONFIG="+e.Kubeconfig("admin"))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("sh: %w: %s", err, out)
	}
	return string(out), nil
}

// PodAt is the pod the container runtime made with address ip: its network
// namespace, found by that address among the runtime's (/run/netns/cni-*),
// for a client whose sockets live in a real pod.
func PodAt(name string, ip netip.Addr) (*Pod, error) {
	nss, _ := filepath.Glob("/run/netns/cni-*")
	for _, ns := range nss {
		out, err := exec.Command("ip", "-n", filepath.Base(ns), "-o", "addr", "show", "dev", "eth0").Output()
		if err == nil && strings.Contains(string(out), " "+ip.String()+"/") {
			return &Pod{Name: name, IP: ip, ns: filepath.Base(ns)}, nil
		}
	}
	return nil, fmt.Errorf("no network namespace holds pod %s's address %s", name, ip)
}

// Resolve looks name up from inside the pod, asking the cluster's DNS
// Service only, over UDP as a pod's resolver does.
func (p *Pod) Resolve(name string, timeout time.Duration) ([]string, error) {
	// The resolver dials from goroutines of its own: each socket is made
	// in the pod's namespace by p.dial.
	r := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return p.dial("udp", netip.AddrPortFrom(netip.MustParseAddr(DNSIP), 53), timeout)
	}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return r.LookupHost(ctx, name)
}
