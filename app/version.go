package app

import "runtime/debug"

// BuildVersion is `git describe` of the commit the binary was built from,
// which main sets from its link-time -X main.BuildVersion.
var BuildVersion string

// version is what --version, the first log line and the image's labels
// say: BuildVersion, or else what the Go toolchain stamped (a module
// version, or "(devel)" and the VCS revision), so that a plain `go build`
// still names its commit.
func version() string {
	if BuildVersion != "" {
		return BuildVersion
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
