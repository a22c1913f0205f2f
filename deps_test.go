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
