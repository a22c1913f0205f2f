//go:build e2e

// Package multinode tests the product on several nodes in one VM
// (framework.Bed): the image deployed from deploy/ as a DaemonSet on each,
// pods spread over them, and clients on the nodes and outside them. As in
// e2e/node, the same tests run against upstream kube-proxy in IPVS mode
// (KIP_NODE_PROXIER=upstream), the control. With KIP_CONFORMANCE_DIR set
// it only keeps the nodes up for Kubernetes' e2e tests (hack/conformance.sh).
//
// make multinode-e2e runs it; docs/testing.md says what it covers.
package multinode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

var (
	env      *framework.Env
	bed      *framework.Bed
	deployed framework.Proxier
)

func TestMain(m *testing.M) {
	framework.Main("multinode-e2e", func(e *framework.Env, p framework.Proxier) (int, error) {
		env, deployed = e, p
		return run(m)
	})
}

func run(m *testing.M) (int, error) {
	var err error
	count := 3
	if s := os.Getenv("KIP_NODES"); s != "" {
		if count, err = strconv.Atoi(s); err != nil || count < 2 || count > 8 {
			return 2, fmt.Errorf("KIP_NODES=%q: want 2 to 8", s)
		}
	}
	// The images hack/test-images.sh built for Kubernetes' tests, if it did.
	images, _ := filepath.Glob(filepath.Join(framework.NodeDir(), "images-multinode", "*.tar"))
	start := time.Now()
	if bed, err = framework.StartBed(env, count, append(images, os.Getenv("KIP_IMAGE"))...); err != nil {
		return 2, err
	}
	defer bed.Stop()
	defer env.DumpCluster(bed.PodLogs())
	defer bed.KeepProxierMetrics(env.Artifacts)
	fmt.Printf("multinode-e2e: %d nodes Ready after %s\n", count, time.Since(start).Round(time.Second))
	if err := deployed.Deploy(env, deployed.Tag); err != nil {
		return 2, err
	}
	if err := env.WaitRollout("kube-system", "daemonset/"+deployed.Name, 5*time.Minute); err != nil {
		return 2, err
	}
	fmt.Printf("multinode-e2e: %s Ready on every node after %s\n", deployed.Name, time.Since(start).Round(time.Second))
	if _, err := env.Kubectl("apply", "-f", "e2e/node/testdata/coredns.yaml", "-f", "e2e/multinode/testdata/workload.yaml"); err != nil {
		return 2, err
	}
	for _, w := range []struct{ ns, what string }{{"kube-system", "deployment/coredns"}, {"multinode", "deployment/echo"}, {"multinode", "deployment/spread"}} {
		if err := env.WaitRollout(w.ns, w.what, 3*time.Minute); err != nil {
			return 2, err
		}
	}
	fmt.Printf("multinode-e2e: workloads Ready after %s\n", time.Since(start).Round(time.Second))
	if dir := os.Getenv("KIP_CONFORMANCE_DIR"); dir != "" {
		return 0, framework.ServeConformance(dir)
	}
	return m.Run(), nil
}
