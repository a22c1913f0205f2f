package ipset

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink"
)

// The netlink library's IpsetList panics when a request fails with an error
// that is not an errno (it asserts err.(syscall.Errno)); the read fails
// instead, and the drift check retries it.
func TestAListThatPanicsIsAnError(t *testing.T) {
	libraryLike := func(string) (*netlink.IPSetResult, error) {
		var err error = errors.New("results may be incomplete or inconsistent")
		_ = int(err.(syscall.Errno)) // what the library does with it
		return nil, err
	}
	if _, err := listContained(libraryLike, "KUBE-CLUSTER-IP"); err == nil || !strings.Contains(err.Error(), "interface conversion") {
		t.Fatalf("err = %v, want the panic as an error", err)
	}
	ok := func(string) (*netlink.IPSetResult, error) { return &netlink.IPSetResult{}, nil }
	if res, err := listContained(ok, "KUBE-CLUSTER-IP"); err != nil || res == nil {
		t.Fatalf("a list that works: %v, %v", res, err)
	}
}
