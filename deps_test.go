package main

import (
	"runtime/debug"
	"slices"
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
