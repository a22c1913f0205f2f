package app

import (
	"bytes"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// An unknown flag gets one line naming it, in kube-proxy's words, and a
// hint; not the whole help, and not the error twice.
func TestAnUnknownFlagIsOneLine(t *testing.T) {
	for _, args := range [][]string{{"--no-such-flag"}, {"diff", "--no-such-flag"}, {"status", "-no-such-flag"}} {
		cmd := Command()
		var out bytes.Buffer
		cmd.Writer, cmd.ErrWriter = &out, &out
		err := cmd.Run(append([]string{"kube-ipvs-proxy"}, args...))
		if err == nil {
			t.Fatalf("%v: no error", args)
		}
		if out.Len() > 0 {
			t.Errorf("%v: printed %d bytes besides the error:\n%s", args, out.Len(), out.String())
		}
		lines := strings.Split(err.Error(), "\n")
		if len(lines) != 2 || lines[0] != "unknown flag: --no-such-flag" || !strings.Contains(lines[1], "--help") {
			t.Errorf("%v: error %q; want \"unknown flag: --no-such-flag\" and a hint", args, err)
		}
	}
}

// diff's and status's help list their own flags before the proxier's.
func TestToolHelpListsItsOwnFlagsFirst(t *testing.T) {
	for _, tool := range []string{"diff", "status"} {
		cmd := Command()
		var out bytes.Buffer
		cmd.Writer, cmd.ErrWriter = &out, &out
		if err := cmd.Run([]string{"kube-ipvs-proxy", tool, "--help"}); err != nil {
			t.Fatal(err)
		}
		help := out.String()
		own, proxier := strings.Index(help, "--output"), strings.Index(help, "--kubeconfig")
		if own < 0 || proxier < 0 || own > proxier {
			t.Errorf("%s --help: --output at %d, --kubeconfig at %d; want its own first:\n%s", tool, own, proxier, help)
		}
	}
}

// diff with an apiserver it cannot reach fails at once, with the reason
// and exit 2, instead of waiting out its 5-minute budget.
func TestDiffFailsFastWhenTheAPIServerIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	cmd := Command()
	var out bytes.Buffer
	cmd.Writer, cmd.ErrWriter = &out, &out
	cmd.ExitErrHandler = func(*cli.Context, error) {} // the test's process stays
	done := make(chan error, 1)
	go func() {
		done <- cmd.Run([]string{"kube-ipvs-proxy", "diff", "--master", "https://" + addr, "--hostname-override", "n"})
	}()
	select {
	case err = <-done:
	case <-time.After(time.Minute):
		t.Fatal("diff still waiting after a minute for an apiserver that refuses connections")
	}
	var exit cli.ExitCoder
	if !errors.As(err, &exit) || exit.ExitCode() != exitError || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("diff: %v (%T); want exit %d naming the refused connection", err, err, exitError)
	}
}
