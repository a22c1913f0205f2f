//go:build e2e

// Package node tests the product as operators run it: the image, deployed
// from deploy/ with kubectl apply -k onto a real kubelet node in the VM,
// with real pods, Deployments and CoreDNS. The same tests run against
// upstream kube-proxy in IPVS mode deployed the same way (KIP_NODE_PROXIER=
// upstream), the control: every test that passes for it must pass for ours.
//
// make node-e2e runs it; docs/testing.md says what it covers.
package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

var (
	env *framework.Env
	// deployed is the proxier under test, as the DaemonSet runs it.
	deployed proxier
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "node-e2e:", err)
		if code == 0 {
			code = 2
		}
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if env, err = framework.Load(); err != nil {
		return 2, err
	}
	switch os.Getenv("KIP_NODE_PROXIER") {
	case "", "ours":
		deployed = ours(os.Getenv("KIP_IMAGE_TAG"))
	case "upstream":
		deployed = upstream(os.Getenv("K8S_VERSION"))
	default:
		return 2, fmt.Errorf("KIP_NODE_PROXIER=%q: want ours or upstream", os.Getenv("KIP_NODE_PROXIER"))
	}
	start := time.Now()
	node, err := framework.StartNode(env, os.Getenv("KIP_IMAGE"))
	if err != nil {
		return 2, err
	}
	defer node.Stop()
	fmt.Printf("node-e2e: node Ready after %s\n", time.Since(start).Round(time.Second))
	defer dumpCluster()
	if err := deployed.deploy(deployed.tag); err != nil {
		return 2, err
	}
	if err := waitRollout("kube-system", "daemonset/"+deployed.name, 3*time.Minute); err != nil {
		return 2, err
	}
	fmt.Printf("node-e2e: %s Ready after %s\n", deployed.name, time.Since(start).Round(time.Second))
	if _, err := env.Kubectl("apply", "-f", "e2e/node/testdata/coredns.yaml", "-f", "e2e/node/testdata/echo.yaml"); err != nil {
		return 2, err
	}
	for _, w := range []struct{ ns, what string }{
		{"kube-system", "deployment/coredns"}, {"node-e2e", "deployment/echo"},
	} {
		if err := waitRollout(w.ns, w.what, 3*time.Minute); err != nil {
			return 2, err
		}
	}
	if _, err := env.Kubectl("-n", "node-e2e", "wait", "--for=condition=Ready", "pod/client", "--timeout=120s"); err != nil {
		return 2, err
	}
	fmt.Printf("node-e2e: workloads Ready after %s\n", time.Since(start).Round(time.Second))
	if dir := os.Getenv("KIP_CONFORMANCE_DIR"); dir != "" {
		return 0, serveConformance(dir)
	}
	return m.Run(), nil
}

// serveConformance keeps the node up for Kubernetes' e2e tests, which run
// on the host (hack/conformance.sh): it says ready in dir and waits there
// for done.
func serveConformance(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		return err
	}
	fmt.Println("node-e2e: ready for the conformance tests")
	for {
		if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
			return nil
		}
		time.Sleep(2 * time.Second)
	}
}

func waitRollout(ns, what string, timeout time.Duration) error {
	_, err := env.Kubectl("-n", ns, "rollout", "status", what, "--timeout="+timeout.String())
	return err
}

// dumpCluster keeps the cluster's pods and events, and the containers'
// logs, with the run's logs.
func dumpCluster() {
	out, _ := env.Kubectl("get", "pods,events", "-A", "-o", "wide")
	_ = os.WriteFile(filepath.Join(env.Artifacts, "cluster.txt"), []byte(out), 0o644)
	_ = os.CopyFS(filepath.Join(env.Artifacts, "pods"), os.DirFS("/var/log/pods"))
}

// proxier is a service proxy as a DaemonSet: ours from deploy/, or
// upstream kube-proxy from testdata/kube-proxy, each through an overlay
// that sets only its image and the apiserver's address.
type proxier struct {
	name, image, tag string
	base             string // the kustomization the overlay builds on
	configMap        string
}

func ours(tag string) proxier {
	if tag == "" {
		tag = "dev"
	}
	return proxier{name: "kube-ipvs-proxy", image: "localhost/kube-ipvs-proxy", tag: tag, base: "deploy", configMap: "kube-ipvs-proxy"}
}

func upstream(version string) proxier {
	if version == "" {
		version = "1.37.2"
	}
	return proxier{name: "kube-proxy", image: "registry.k8s.io/kube-proxy", tag: "v" + version,
		base: "e2e/node/testdata/kube-proxy", configMap: "kube-proxy"}
}

// apiserverKubeconfig is the kubeconfig both proxiers' ConfigMaps carry,
// with the address the VM reaches the apiserver at.
const apiserverKubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: https://10.0.2.100:6443
  name: default
contexts:
- context: {cluster: default, namespace: default, user: default}
  name: default
current-context: default
users:
- name: default
  user:
    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
`

// deploy applies the proxier's manifests with kubectl apply -k, through an
// overlay that changes the image's tag and the kubeconfig's server.
func (p proxier) deploy(tag string) error {
	dir, err := os.MkdirTemp("", "overlay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	base, err := filepath.Abs(p.base)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(dir, base)
	if err != nil {
		return err
	}
	kustomization := fmt.Sprintf(`resources: [%s]
images: [{name: %s, newTag: %q}]
configMapGenerator:
- {name: %s, namespace: kube-system, behavior: merge, files: [kubeconfig.conf]}
`, rel, p.image, tag, p.configMap)
	for name, text := range map[string]string{"kustomization.yaml": kustomization, "kubeconfig.conf": apiserverKubeconfig} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	out, err := env.Kubectl("apply", "-k", dir)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "daemonset.apps/"+p.name) {
		return fmt.Errorf("kubectl apply -k %s applied no DaemonSet %s:\n%s", p.base, p.name, out)
	}
	return nil
}
