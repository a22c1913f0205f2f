package main

import (
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// vulnerable lists module versions with known vulnerabilities that reach
// this binary through a dependency, so that a dependency update cannot pull
// one back in unnoticed.
var vulnerable = map[string][]string{
	// GO-2025-4188 (CVE-2025-65637): Entry.Writer hangs on a line over
	// 64 KiB. Through github.com/moby/ipvs.
	"github.com/sirupsen/logrus": {"v1.9.0", "v1.9.2"},
}

func TestNoDependencyAtAVulnerableVersion(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		t.Skip("no build information in this binary")
	}
	for _, m := range info.Deps {
		if slices.Contains(vulnerable[m.Path], m.Version) {
			t.Errorf("%s %s has a known vulnerability; require a fixed version in go.mod", m.Path, m.Version)
		}
	}
}

// The clientset's scheme registers every API group, and urfave/cli's
// templates keep every exported method the linker can reach: with it the
// binary, and the image, were twice the size (see kubeclient).
func TestBinaryLeavesOutTheClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/informers"} {
			if pkg == banned || strings.HasPrefix(pkg, banned+"/") {
				t.Errorf("the binary imports %s; use kubeclient", pkg)
			}
		}
	}
}

// forbidden are the imports each package must not reach, directly or not:
// the package graph is the design, and the compiler only checks cycles.
var forbidden = map[string][]string{
	// Desired state is a pure function of API objects into the values of
	// kernel objects: no kernel, no apiserver, no orchestration.
	"./desired": {"ipvs", "ipset", "dummyiface", "iptables", "conntrack", "nodeaddrs", "internal/nlbatch", "reconciler", "glue",
		"proxier", "kubeclient", "informers", "github.com/vishvananda/netlink", "k8s.io/client-go"},
	// The values of kernel objects are plain data.
	"./objects": {"ipvs", "ipset", "dummyiface", "iptables", "internal", "desired", "github.com/vishvananda/netlink", "k8s.io"},
	// The reconciler writes the kernel from desired state: it knows no
	// Proxier and no apiserver.
	"./reconciler": {"proxier", "kubeclient", "informers", "k8s.io/client-go"},
	// The operator's view of the reconciler's belief reads what it is lent:
	// no kernel.
	"./reconciler/serviceview": {"ipvs", "ipset", "dummyiface", "iptables", "conntrack", "internal/nlbatch", "github.com/vishvananda/netlink", "k8s.io/client-go"},
	// The kernel packages know nothing above them.
	"./ipvs":       {"desired", "reconciler", "proxier", "glue", "app"},
	"./ipset":      {"desired", "reconciler", "proxier", "glue", "app"},
	"./dummyiface": {"desired", "reconciler", "proxier", "glue", "app"},
	"./iptables":   {"desired", "reconciler", "proxier", "glue", "app"},
	// The proxier is run by the command, never the reverse.
	"./proxier": {"app"},
	"./diff":    {"app"},
	// The operator's view is plain data.
	"./view": {"ipvs", "ipset", "dummyiface", "iptables", "internal", "desired", "reconciler", "proxier", "github.com/vishvananda/netlink", "k8s.io/client-go"},
	// Failure bookkeeping is plain data and clocks.
	"./status": {"ipvs", "ipset", "dummyiface", "iptables", "internal", "desired", "reconciler", "proxier", "github.com/vishvananda/netlink", "k8s.io/client-go"},
	// The other modes' leftovers are theirs: nothing of IPVS mode's state.
	"./leftovers": {"proxier", "reconciler", "ipvs", "ipset", "dummyiface", "kubeclient", "informers", "k8s.io/client-go"},
	// The chains are iptables' alone.
	"./glue": {"proxier", "reconciler", "ipvs", "ipset", "dummyiface", "kubeclient", "informers", "k8s.io/client-go"},
}

func TestPackagesImportOnlyDown(t *testing.T) {
	const module = "github.com/kube-ipvs-proxy/kube-ipvs-proxy/"
	for pkg, banned := range forbidden {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Skipf("go list: %v", err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, b := range banned {
				if !strings.Contains(b, ".") {
					b = module + b
				}
				if dep == b || strings.HasPrefix(dep, b+"/") {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
}
