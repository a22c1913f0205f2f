// Command kube-ipvs-proxy is a drop-in replacement for kube-proxy in IPVS
// mode. The command is package app: its options (flags over --config,
// checked once) and the start-up sequence that runs them.
package main

import (
	"fmt"
	"os"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/app"
)

// buildVersion is `git describe` of the commit the binary was built from,
// set by the Makefile and the Dockerfile with -ldflags "-X main.buildVersion=...".
var buildVersion string

func main() {
	app.BuildVersion = buildVersion
	if err := app.Command().Run(os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "kube-ipvs-proxy:", err)
		os.Exit(1)
	}
}
