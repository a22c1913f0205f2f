//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestExcludedCIDRsLeftAlone: a virtual server and a kube-ipvs0 address in
// --ipvs-exclude-cidrs that no Service wants (another tool's) survive drift
// checks, while a stray address outside it is removed by the same checks.
// Upstream removes such an address.
func TestExcludedCIDRsLeftAlone(t *testing.T) {
	t.Parallel()
	p := ourProxier(t)
	theirs, stray := mustAddr("10.250.99.1"), mustAddr("10.96.36.9")
	key := ipvs.Key{Address: theirs, Protocol: ipvs.TCP, Port: 22}
	for _, cmd := range [][]string{
		{"ipvsadm", "-A", "-t", "10.250.99.1:22", "-s", "rr"},
		{"ip", "addr", "add", theirs.String() + "/32", "dev", "kube-ipvs0"},
		{"ip", "addr", "add", stray.String() + "/32", "dev", "kube-ipvs0"},
	} {
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", cmd, err, out)
		}
	}
	t.Cleanup(func() {
		_ = exec.Command("ipvsadm", "-D", "-t", "10.250.99.1:22").Run()
		_ = exec.Command("ip", "addr", "del", theirs.String()+"/32", "dev", "kube-ipvs0").Run()
	})
	checks := countLogLines(t, p, `full=true`)
	eventually(t, "two drift checks", time.Minute, func() error {
		if n := countLogLines(t, p, `full=true`); n < checks+2 {
			return fmt.Errorf("%d so far", n-checks)
		}
		return nil
	})
	if hasAddress(t, stray) {
		t.Errorf("the stray address %s outside %s is still bound", stray, excludedCIDR)
	}
	if !hasAddress(t, theirs) {
		t.Errorf("the excluded address %s was unbound", theirs)
	}
	if !hasVirtualServer(t, key) {
		t.Errorf("the excluded virtual server %v was deleted", key)
	}
}
