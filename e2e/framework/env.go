package framework

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
	Control   string // where testcluster takes requests (Env.Cluster)
	Admin     *kubernetes.Clientset
}

// Load reads the environment; it fails outside the VM harness.
func Load() (*Env, error) {
	if os.Getenv("KIP_IN_VM") != "1" {
		return nil, errors.New("must run inside the test VM: use `make e2e`")
	}
	e := &Env{State: os.Getenv("KIP_STATE"), KBin: os.Getenv("KBIN"), Control: os.Getenv("KIP_CONTROL")}
	if e.State == "" || e.KBin == "" {
		return nil, errors.New("KIP_STATE and KBIN must be set (testcluster and the Makefile set them)")
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	// Executables run from a tmpfs copy: the checkout is a cache-less 9p
	// share, where a Go binary's start-up page faults cost ~1.4 s (measured),
	// while upstream's binary sits on a cached mount. On a node both would be
	// in the page cache.
	// kube-ipvs-proxy-before is there for make bench BENCH_BEFORE=<rev>.
	if e.Bin, err = stage(filepath.Join(wd, "bin"), "kube-ipvs-proxy", "echo", "kube-ipvs-proxy-before?"); err != nil {
		return nil, err
	}
	if e.KBin, err = stage(e.KBin, "kube-proxy"); err != nil {
		return nil, err
	}
	e.Artifacts = filepath.Join(wd, ".vm", "artifacts")
	if err := os.MkdirAll(e.Artifacts, 0o755); err != nil {
		return nil, err
	}
	if e.Admin, err = e.client("admin"); err != nil {
		return nil, err
	}
	return e, nil
}

// LoadHost reads the environment on the host, where testcluster runs its
// command before it starts the VM: only State and Admin are set. Creating
// API objects from here is much faster than from the emulated VM.
func LoadHost() (*Env, error) {
	e := &Env{State: os.Getenv("KIP_STATE")}
	if e.State == "" {
		return nil, errors.New("KIP_STATE must be set (run under testcluster)")
	}
	var err error
	if e.Admin, err = e.client("admin-host"); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Env) client(who string) (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig(who))
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 400, 800
	// Protobuf: in the emulated VM, JSON encoding limited the bench's churn
	// to ~56 writes per second.
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	return kubernetes.NewForConfig(rc)
}

// stage copies the named executables from dir to a fresh tmpfs directory and
// returns it; a name ending in "?" is copied if it is there.
func stage(dir string, names ...string) (string, error) {
	out, err := os.MkdirTemp("/run", "kip-bin-")
	if err != nil {
		return "", err
	}
	for _, n := range names {
		n, optional := strings.CutSuffix(n, "?")
		data, err := os.ReadFile(filepath.Join(dir, n))
		if optional && errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("stage %s: %w", n, err)
		}
		if err := os.WriteFile(filepath.Join(out, n), data, 0o755); err != nil {
			return "", fmt.Errorf("stage %s: %w", n, err)
		}
	}
	return out, nil
}

// Kubeconfig returns the path of "admin", "admin-host" (the apiserver's
// address on the host) or "proxy" (system:kube-proxy).
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
