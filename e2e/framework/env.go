package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// NodeName is the Node the test cluster registers and the proxier runs as.
const NodeName = "kip-node"

// Env is the test environment the harness (hack/vm.sh via testcluster) sets up.
type Env struct {
	State     string // kubeconfigs from testcluster
	KBin      string // kube-apiserver, kube-proxy, kubectl, etcd
	Bin       string // our binaries: kube-ipvs-proxy, echo
	Artifacts string // logs kept after the run
	Admin     *kubernetes.Clientset
}

// Load reads the environment; it fails outside the VM harness.
func Load() (*Env, error) {
	if os.Getenv("KIP_IN_VM") != "1" {
		return nil, errors.New("must run inside the test VM: use `make e2e`")
	}
	e := &Env{State: os.Getenv("KIP_STATE"), KBin: os.Getenv("KBIN")}
	if e.State == "" || e.KBin == "" {
		return nil, errors.New("KIP_STATE and KBIN must be set (testcluster and the Makefile set them)")
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	e.Bin = filepath.Join(wd, "bin")
	e.Artifacts = filepath.Join(wd, ".vm", "artifacts")
	if err := os.MkdirAll(e.Artifacts, 0o755); err != nil {
		return nil, err
	}
	rc, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig("admin"))
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 200, 400
	if e.Admin, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}
	return e, nil
}

// Kubeconfig returns the path of "admin" or "proxy" (system:kube-proxy).
func (e *Env) Kubeconfig(who string) string { return filepath.Join(e.State, who+".kubeconfig") }

// Eventually calls fn until it succeeds or timeout passes, returning its last error.
func Eventually(timeout, every time.Duration, fn func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(every)
	}
}

// Ctx is a context for one API call.
func Ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}
