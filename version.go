package main

import "runtime/debug"

// buildVersion is `git describe` of the commit the binary was built from,
// set by the Makefile and the Dockerfile with -ldflags "-X main.buildVersion=...".
var buildVersion string

// version is what --version, the first log line and the image's labels
// say: buildVersion, or else what the Go toolchain stamped (a module
// version, or "(devel)" and the VCS revision), so that a plain `go build`
// still names its commit.
func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			v += " " + s.Value
		}
	}
	return v
}
