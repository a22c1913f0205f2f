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
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

var (
	env *framework.Env
	// deployed is the proxier under test, as the DaemonSet runs it.
	deployed framework.Proxier
)

func TestMain(m *testing.M) {
	framework.Main("node-e2e", func(e *framework.Env, p framework.Proxier) (int, error) {
		env, deployed = e, p
		return run(m)
	})
}

func run(m *testing.M) (int, error) {
	var err error
	start := time.Now()
	node, err := framework.StartNode(env, os.Getenv("KIP_IMAGE"))
	if err != nil {
		return 2, err
	}
	defer node.Stop()
	fmt.Printf("node-e2e: node Ready after %s\n", time.Since(start).Round(time.Second))
	defer env.DumpCluster(map[string]string{"pods": "/var/log/pods"})
	if err := deployed.Deploy(env, deployed.Tag); err != nil {
		return 2, err
	}
	if err := waitRollout("kube-system", "daemonset/"+deployed.Name, 3*time.Minute); err != nil {
		return 2, err
	}
	fmt.Printf("node-e2e: %s Ready after %s\n", deployed.Name, time.Since(start).Round(time.Second))
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
		return 0, framework.ServeConformance(dir)
	}
	return m.Run(), nil
}

func waitRollout(ns, what string, timeout time.Duration) error {
	return env.WaitRollout(ns, what, timeout)
}
