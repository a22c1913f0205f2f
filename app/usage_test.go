package app

import (
	"bytes"
	"strings"
	"testing"
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
