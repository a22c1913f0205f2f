// Command testcluster runs a throwaway etcd and kube-apiserver on this
// machine's loopback, writes kubeconfigs for an admin and for the proxier's
// least-privilege identity (system:kube-proxy), creates the test Node, runs
// one command (usually the VM) and tears everything down again.
//
//	testcluster -bin DIR -state DIR [-node NAME] [-etcd-seed DIR] [-control DIR] [-controllers] -- CMD ARGS...
//
// With -controllers it runs kube-controller-manager and kube-scheduler too,
// publishes the apiserver as the kubernetes Service's endpoint at
// 10.0.2.100:PORT, and leaves the Node to a real kubelet in the VM
// (kubelet.kubeconfig, e2e/node).
//
// The command sees KIP_APISERVER_PORT (for the VM's port forward),
// KIP_TUNNEL_PORT (with -controllers: where the apiserver dials the node),
// KIP_STATE (the directory with admin.kubeconfig, proxy.kubeconfig,
// admin-host.kubeconfig) and, with -control, KIP_CONTROL (control.go). The
// kubeconfigs without "-host" point at 10.0.2.100:6443, the address the VM
// reaches the apiserver at.
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	adminToken   = "kip-admin-token"
	proxyToken   = "kip-proxy-token"
	kubeletToken = "kip-kubelet-token"
	vmAPI        = "https://10.0.2.100:6443"
)

func main() {
	bin := flag.String("bin", "", "directory with etcd and kube-apiserver")
	state := flag.String("state", "", "directory for certificates, data and kubeconfigs (emptied first)")
	node := flag.String("node", "kip-node", "name of the Node object to create")
	seed := flag.String("etcd-seed", "", "if this etcd data directory exists, start etcd from a copy of it (the bench's API objects, created once)")
	controlDir := flag.String("control", "", "directory (shared with the VM) where the VM asks to stop and start kube-apiserver; see control.go")
	controllers := flag.Bool("controllers", false, "run kube-controller-manager and kube-scheduler for a real kubelet node")
	kubelets := flag.String("kubelets", "", "comma-separated names of more nodes, each with its kubelet's identity in kubelet-NAME.kubeconfig (the several nodes of e2e/multinode)")
	flag.Parse()
	if *bin == "" || *state == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: testcluster -bin DIR -state DIR [-node NAME] [-etcd-seed DIR] [-control DIR] [-controllers] [-kubelets A,B] -- CMD ARGS...")
		os.Exit(2)
	}
	var more []string
	if *kubelets != "" {
		more = strings.Split(*kubelets, ",")
	}
	code, err := run(*bin, *state, *node, *seed, *controlDir, *controllers, more, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "testcluster:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func run(bin, state, nodeName, seed, controlDir string, controllers bool, moreNodes, cmdArgs []string) (int, error) {
	state, _ = filepath.Abs(state)
	if controlDir != "" {
		controlDir, _ = filepath.Abs(controlDir) // the VM sees this machine's paths
	}
	if err := os.RemoveAll(state); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return 0, err
	}
	if seed != "" {
		if _, err := os.Stat(seed); err == nil {
			if err := os.CopyFS(filepath.Join(state, "etcd"), os.DirFS(seed)); err != nil {
				return 0, fmt.Errorf("copy etcd seed: %w", err)
			}
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var ports [4]int
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		ports[i] = p
	}
	etcdPort, peerPort, apiPort, tunnelPort := ports[0], ports[1], ports[2], ports[3]
	caPEM, err := writeCerts(state)
	if err != nil {
		return 0, err
	}
	tokens := fmt.Sprintf("%s,kip-admin,1,\"system:masters\"\n%s,system:kube-proxy,2,\"\"\n%s,system:node:%s,3,\"system:nodes\"\n",
		adminToken, proxyToken, kubeletToken, nodeName)
	for i, n := range moreNodes {
		tokens += fmt.Sprintf("%s-%s,system:node:%s,%d,\"system:nodes\"\n", kubeletToken, n, n, 10+i)
	}
	if err := os.WriteFile(filepath.Join(state, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return 0, err
	}

	logf := func(name string) *os.File {
		f, _ := os.Create(filepath.Join(state, name+".log"))
		return f
	}
	etcd := exec.CommandContext(ctx, filepath.Join(bin, "etcd"),
		"--name=kip", "--data-dir="+filepath.Join(state, "etcd"),
		"--listen-client-urls=http://127.0.0.1:"+strconv.Itoa(etcdPort),
		"--advertise-client-urls=http://127.0.0.1:"+strconv.Itoa(etcdPort),
		"--listen-peer-urls=http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-advertise-peer-urls=http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--initial-cluster=kip=http://127.0.0.1:"+strconv.Itoa(peerPort),
		"--unsafe-no-fsync", "--log-level=warn")
	etcd.Stdout, etcd.Stderr = logf("etcd"), logf("etcd")
	if err := etcd.Start(); err != nil {
		return 0, fmt.Errorf("start etcd: %w", err)
	}
	defer stopProcess(etcd)

	hostURL := "https://127.0.0.1:" + strconv.Itoa(apiPort)
	for _, kc := range []struct{ file, server, user, token string }{
		{"admin-host.kubeconfig", hostURL, "admin", adminToken},
		{"admin.kubeconfig", vmAPI, "admin", adminToken},
		{"proxy.kubeconfig", vmAPI, "system:kube-proxy", proxyToken},
		{"kubelet.kubeconfig", vmAPI, "system:node:" + nodeName, kubeletToken},
	} {
		if err := writeKubeconfig(filepath.Join(state, kc.file), kc.server, kc.user, kc.token, caPEM); err != nil {
			return 0, err
		}
	}
	for _, n := range moreNodes {
		if err := writeKubeconfig(filepath.Join(state, "kubelet-"+n+".kubeconfig"), vmAPI, "system:node:"+n, kubeletToken+"-"+n, caPEM); err != nil {
			return 0, err
		}
	}
	api := &apiserver{bin: filepath.Join(bin, "kube-apiserver"), log: filepath.Join(state, "kube-apiserver.log"),
		url: hostURL, caPEM: caPEM, args: []string{
			"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(etcdPort),
			"--secure-port=" + strconv.Itoa(apiPort), "--bind-address=127.0.0.1",
			"--service-cluster-ip-range=10.96.0.0/16,fd00:10:96::/112",
			"--authorization-mode=Node,RBAC", "--token-auth-file=" + filepath.Join(state, "tokens.csv"),
			"--client-ca-file=" + filepath.Join(state, "ca.crt"),
			"--tls-cert-file=" + filepath.Join(state, "apiserver.crt"), "--tls-private-key-file=" + filepath.Join(state, "apiserver.key"),
			"--service-account-issuer=https://kubernetes.default.svc",
			"--service-account-key-file=" + filepath.Join(state, "sa.key"),
			"--service-account-signing-key-file=" + filepath.Join(state, "sa.key"),
			"--enable-priority-and-fairness=false",
			"--max-requests-inflight=2000", "--max-mutating-requests-inflight=1000",
			// As kubeadm: node agents such as a service proxy run privileged.
			"--allow-privileged=true"}}
	if controllers {
		// Pods reach the apiserver through the kubernetes Service, whose
		// endpoint the VM forwards to this port (hack/vm.sh -f).
		api.args = append(api.args, "--advertise-address=10.0.2.100", "--endpoint-reconciler-type=lease",
			"--egress-selector-config-file="+filepath.Join(state, "egress.yaml"), "--kubelet-preferred-address-types=InternalIP")
		// The apiserver reaches the node (kubelet's API for exec and logs,
		// pods for its proxy) through e2e/tunnel in the VM, which the VM's
		// port forward (hack/vm.sh -p KIP_TUNNEL_PORT:8132) makes this port.
		// The apiserver speaks HTTP CONNECT over TCP only with TLS, so it
		// dials a unix socket that forwardUnix carries to the port.
		sock := filepath.Join(state, "tunnel.sock")
		stopForward, err := forwardUnix(sock, "127.0.0.1:"+strconv.Itoa(tunnelPort))
		if err != nil {
			return 0, err
		}
		defer stopForward()
		egress := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, sock)
		if err := os.WriteFile(filepath.Join(state, "egress.yaml"), []byte(egress), 0o644); err != nil {
			return 0, err
		}
	} else {
		api.args = append(api.args, "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none")
	}
	defer api.stop()
	if err := api.start(ctx); err != nil {
		return 0, err
	}
	if controllers {
		admin := filepath.Join(state, "admin-host.kubeconfig")
		for _, c := range []struct {
			name string
			args []string
		}{
			{"kube-controller-manager", []string{"--kubeconfig=" + admin, "--leader-elect=false", "--secure-port=0",
				"--service-account-private-key-file=" + filepath.Join(state, "sa.key"),
				"--root-ca-file=" + filepath.Join(state, "ca.crt"), "--use-service-account-credentials=true",
				"--cluster-name=kip"}},
			{"kube-scheduler", []string{"--kubeconfig=" + admin, "--leader-elect=false", "--secure-port=0"}},
		} {
			cmd := exec.CommandContext(ctx, filepath.Join(bin, c.name), c.args...)
			cmd.Stdout, cmd.Stderr = logf(c.name), logf(c.name)
			if err := cmd.Start(); err != nil {
				return 0, fmt.Errorf("start %s: %w", c.name, err)
			}
			defer stopProcess(cmd)
		}
	} else if err := createNode(ctx, filepath.Join(state, "admin-host.kubeconfig"), nodeName); err != nil {
		return 0, err
	}
	fmt.Fprintf(os.Stderr, "testcluster: kube-apiserver ready on %s (state in %s)\n", hostURL, state)

	cmd := exec.CommandContext(ctx, cmdArgs[0], cmdArgs[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "KIP_APISERVER_PORT="+strconv.Itoa(apiPort), "KIP_STATE="+state,
		"KIP_TUNNEL_PORT="+strconv.Itoa(tunnelPort))
	if controlDir != "" {
		c := &control{dir: controlDir, api: api, etcd: "http://127.0.0.1:" + strconv.Itoa(etcdPort)}
		if err := c.reset(); err != nil {
			return 0, err
		}
		cctx, cancel := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() { c.serve(cctx); close(served) }()
		defer func() { cancel(); <-served }()
		cmd.Env = append(cmd.Env, "KIP_CONTROL="+controlDir)
	}
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

func stopProcess(c *exec.Cmd) {
	if c.Process == nil {
		return
	}
	_ = c.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.Process.Kill()
		<-done
	}
}

func waitReady(ctx context.Context, url string, caPEM []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
	return errors.New("kube-apiserver not ready after 90s")
}

// createNode registers the node the proxier runs as, with the VM's address.
func createNode(ctx context.Context, kubeconfig, name string) error {
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	n, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: map[string]string{"kubernetes.io/hostname": name}}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) { // etcd came from a seed
		n, err = cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("create node %s: %w", name, err)
	}
	n.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.2.15"}, {Type: v1.NodeHostName, Address: name}}
	if _, err := cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set node %s addresses: %w", name, err)
	}
	return nil
}

func writeKubeconfig(path, server, user, token string, caPEM []byte) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kip
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %q
  user:
    token: %s
contexts:
- name: kip
  context: {cluster: kip, user: %q}
current-context: kip
`, server, b64(caPEM), user, token, user)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// writeCerts makes a CA, a serving certificate valid for every address the
// apiserver is reached at, and a service-account key. It returns the CA PEM.
func writeCerts(dir string) ([]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "kip-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "kube-apiserver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.2.100"), net.ParseIP("10.96.0.1")}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	srvKeyDER, _ := x509.MarshalECPrivateKey(srvKey)
	files := map[string][]byte{
		"ca.crt":        caPEM,
		"apiserver.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srvDER}),
		"apiserver.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: srvKeyDER}),
		"sa.key":        pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, err
		}
	}
	return caPEM, nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// forwardUnix accepts connections on the unix socket path and carries each
// to the TCP address to, until the returned stop is called.
func forwardUnix(path, to string) (stop func(), err error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.DialTimeout("tcp", to, 10*time.Second)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
				go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return func() { ln.Close() }, nil
}
