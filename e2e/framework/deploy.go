package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Proxier is a service proxy as a DaemonSet: ours from deploy/ or from its
// Helm chart, or upstream kube-proxy from e2e/node/testdata/kube-proxy,
// each given only its image and the apiserver's address.
type Proxier struct {
	Name, Image, Tag string
	Base             string // the kustomization the overlay builds on
	ConfigMap        string
	// Chart, if set, is rendered with helm template (KIP_HELM) and applied
	// in place of Base, with kube-proxy's labels (kubeProxyLabels).
	Chart string
	// App is the pods' k8s-app label.
	App string
}

// Ours is kube-ipvs-proxy's image at tag ("dev" if empty).
func Ours(tag string) Proxier {
	if tag == "" {
		tag = "dev"
	}
	return Proxier{Name: "kube-ipvs-proxy", Image: "localhost/kube-ipvs-proxy", Tag: tag, Base: "deploy", ConfigMap: "kube-ipvs-proxy",
		App: "kube-ipvs-proxy"}
}

// OursFromChart is ours deployed by charts/kube-ipvs-proxy with the value
// that gives its pods kube-proxy's label.
func OursFromChart(tag string) Proxier {
	p := Ours(tag)
	p.Chart, p.App = "charts/kube-ipvs-proxy", "kube-proxy"
	return p
}

// Upstream is kube-proxy vversion (K8S_VERSION's default if empty) in IPVS mode.
func Upstream(version string) Proxier {
	if version == "" {
		version = "1.37.2"
	}
	return Proxier{Name: "kube-proxy", Image: "registry.k8s.io/kube-proxy", Tag: "v" + version,
		Base: "e2e/node/testdata/kube-proxy", ConfigMap: "kube-proxy", App: "kube-proxy"}
}

// ProxierFromEnv is KIP_NODE_PROXIER's proxier: ours (the default) at
// KIP_IMAGE_TAG from deploy/, chart the same from the Helm chart, or
// upstream at K8S_VERSION.
func ProxierFromEnv() (Proxier, error) {
	switch os.Getenv("KIP_NODE_PROXIER") {
	case "", "ours":
		return Ours(os.Getenv("KIP_IMAGE_TAG")), nil
	case "chart":
		return OursFromChart(os.Getenv("KIP_IMAGE_TAG")), nil
	case "upstream":
		return Upstream(os.Getenv("K8S_VERSION")), nil
	}
	return Proxier{}, fmt.Errorf("KIP_NODE_PROXIER=%q: want ours, chart or upstream", os.Getenv("KIP_NODE_PROXIER"))
}

// apiserverURL is the address the VM reaches the apiserver at.
const apiserverURL = "https://10.0.2.100:6443"

// apiserverKubeconfig is the kubeconfig both proxiers' ConfigMaps carry,
// with the address the VM reaches the apiserver at.
const apiserverKubeconfig = `apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
    server: ` + apiserverURL + `
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

// Deploy applies the proxier's manifests with kubectl apply -k, through an
// overlay that changes the image's tag and the kubeconfig's server.
func (p Proxier) Deploy(e *Env, tag string) error {
	if p.Chart != "" {
		return p.deployChart(e, tag)
	}
	dir, err := os.MkdirTemp("", "overlay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	base, err := filepath.Abs(p.Base)
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
`, rel, p.Image, tag, p.ConfigMap)
	for name, text := range map[string]string{"kustomization.yaml": kustomization, "kubeconfig.conf": apiserverKubeconfig} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	out, err := e.Kubectl("apply", "-k", dir)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "daemonset.apps/"+p.Name) {
		return fmt.Errorf("kubectl apply -k %s applied no DaemonSet %s:\n%s", p.Base, p.Name, out)
	}
	return nil
}

// deployChart renders the chart as an operator would, helm template with
// the image and the apiserver's address as values, and applies the result.
func (p Proxier) deployChart(e *Env, tag string) error {
	helm := os.Getenv("KIP_HELM")
	if helm == "" {
		return fmt.Errorf("KIP_HELM (the helm binary) unset: the chart cannot be rendered")
	}
	manifests, err := exec.Command(helm, "template", p.Name, p.Chart, "--namespace", "kube-system",
		"--set", "image.repository="+p.Image, "--set", "image.tag="+tag, "--set", "apiServer="+apiserverURL,
		"--set", "kubeProxyLabels=true").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return fmt.Errorf("helm template %s: %w", p.Chart, err)
	}
	f, err := os.CreateTemp("", "chart-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(manifests); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	out, err := e.Kubectl("apply", "-f", f.Name())
	if err != nil {
		return err
	}
	if !strings.Contains(out, "daemonset.apps/"+p.Name) {
		return fmt.Errorf("the chart %s rendered no DaemonSet %s:\n%s", p.Chart, p.Name, out)
	}
	return nil
}

// WaitRollout waits until kubectl rollout status says what (kind/name) in
// ns is rolled out.
func (e *Env) WaitRollout(ns, what string, timeout time.Duration) error {
	_, err := e.Kubectl("-n", ns, "rollout", "status", what, "--timeout="+timeout.String())
	return err
}

// DumpCluster keeps the cluster's nodes, pods and events, and the
// containers' logs (each node's /var/log/pods, by the artifacts'
// directory to copy it to), with the run's logs.
func (e *Env) DumpCluster(podLogs map[string]string) {
	out, _ := e.Kubectl("get", "nodes,pods,events", "-A", "-o", "wide")
	_ = os.WriteFile(filepath.Join(e.Artifacts, "cluster.txt"), []byte(out), 0o644)
	for to, from := range podLogs {
		_ = os.CopyFS(filepath.Join(e.Artifacts, to), os.DirFS(from))
	}
}

// ServeConformance keeps the nodes up for Kubernetes' e2e tests, which run
// on the host (hack/conformance.sh): it says ready in dir and waits there
// for done.
func ServeConformance(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		return err
	}
	fmt.Println("ready for the conformance tests")
	for {
		if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
			return nil
		}
		time.Sleep(2 * time.Second)
	}
}

// Main runs a package of the proxier deployed as a DaemonSet: it loads the
// environment and the proxier under test (KIP_NODE_PROXIER), calls run,
// and exits with its code, 2 when run fails before its tests.
func Main(name string, run func(*Env, Proxier) (int, error)) {
	code, err := func() (int, error) {
		e, err := Load()
		if err != nil {
			return 2, err
		}
		p, err := ProxierFromEnv()
		if err != nil {
			return 2, err
		}
		return run(e, p)
	}()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		if code == 0 {
			code = 2
		}
	}
	os.Exit(code)
}
