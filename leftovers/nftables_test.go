package leftovers

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// inNewNetns runs fn on a thread in a network namespace of its own; the
// thread is never unlocked, so it ends with the namespace.
func inNewNetns(t *testing.T, fn func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a network namespace needs root")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			t.Errorf("unshare: %v", err)
			return
		}
		fn()
	}()
	<-done
}

func TestNetlinkDeletesTheNFTablesModeTable(t *testing.T) {
	inNewNetns(t, func() {
		nft := func(args ...string) string {
			out, err := exec.Command("nft", args...).CombinedOutput()
			if err != nil {
				t.Errorf("nft %v: %v: %s", args, err, out)
			}
			return string(out)
		}
		for _, family := range []string{"ip", "ip6"} {
			if there, err := (Netlink{}).DeleteTable(family, "kube-proxy"); there || err != nil {
				t.Errorf("%s: with no table, DeleteTable said %v, %v; want false, nil", family, there, err)
			}
			nft("add", "table", family, "kube-proxy")
			nft("add", "chain", family, "kube-proxy", "nat-prerouting", "{ type nat hook prerouting priority dstnat; }")
		}
		nft("add", "table", "ip", "other")
		for _, family := range []string{"ip", "ip6"} {
			if there, err := (Netlink{}).DeleteTable(family, "kube-proxy"); !there || err != nil {
				t.Errorf("%s: DeleteTable said %v, %v; want true, nil", family, there, err)
			}
		}
		if tables := strings.TrimSpace(nft("list", "tables")); tables != "table ip other" {
			t.Errorf("tables left: %q; want only ip other", tables)
		}
	})
	if _, err := (Netlink{}).DeleteTable("inet", "kube-proxy"); err == nil {
		t.Error("a family kube-proxy does not use was accepted")
	}
}
