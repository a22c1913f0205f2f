package app

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// moduleSource is where a kernel's modules are seen: /sys/module lists the
// loaded ones, modules.builtin the built-in ones.
type moduleSource struct {
	sysModule, builtin string
}

func hostModules() moduleSource {
	var u unix.Utsname
	_ = unix.Uname(&u)
	release := unix.ByteSliceToString(u.Release[:])
	return moduleSource{sysModule: "/sys/module", builtin: filepath.Join("/lib/modules", release, "modules.builtin")}
}

// available says whether module m is loaded or built in.
func (s moduleSource) available(m string) bool {
	if _, err := os.Stat(filepath.Join(s.sysModule, m)); err == nil {
		return true
	}
	f, err := os.Open(s.builtin)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.TrimSuffix(filepath.Base(sc.Text()), ".ko") == m {
			return true
		}
	}
	return false
}

// requireModules loads, where modprobe can, the modules IPVS mode needs:
// IPVS, the node's scheduler, ipset and dummy. It refuses to run when one
// is neither loaded nor built in, naming each and how to load it.
// br_netfilter is only warned about, as upstream does: routed CNI plugins
// have no bridge for it to act on.
func requireModules(log *zap.Logger, s moduleSource, scheduler string) error {
	ensure := func(m string) bool {
		if s.available(m) {
			return true // no process to start: ~0.15 s each in the test VM
		}
		if err := exec.Command("modprobe", m).Run(); err != nil {
			log.Debug("modprobe failed", zap.String("module", m), zap.Error(err))
		}
		return s.available(m)
	}
	var missing []string
	for _, m := range []string{"ip_vs", "ip_vs_" + scheduler, "ip_set", "dummy"} {
		if !ensure(m) {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the kernel lacks module(s) %s: load them on the node with `modprobe %s` "+
			"(and persist it in /etc/modules-load.d), or give the container /lib/modules and CAP_SYS_MODULE",
			strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	if !ensure("br_netfilter") {
		log.Warn("br_netfilter is not loaded: traffic between pods on one Linux bridge bypasses iptables, so a pod reaching a Service on its own bridge is not masqueraded; load it with `modprobe br_netfilter` if pods sit on a bridge")
	}
	return nil
}
