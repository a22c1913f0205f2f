package app

import (
	"cmp"

	"go.uber.org/zap"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// openKernel opens every kernel table, loading modules first where modprobe
// exists (in a container it usually does not, and the host must have them),
// and makes the node-wide settings. A timeout the kernel refuses is logged,
// not fatal, as upstream: the proxier works with the kernel's own.
func openKernel(log *zap.Logger, settings KernelSettings) (proxier.Kernel, error) {
	if err := requireModules(log, hostModules(), settings.Scheduler); err != nil {
		return proxier.Kernel{}, err
	}
	k, err := proxier.NewKernel(settings.IPv6)
	if err != nil {
		return k, err
	}
	backend, why := iptables.Backend()
	log.Info("iptables backend", zap.String("backend", cmp.Or(backend, "the node's alternatives")), zap.String("why", why))
	if err := ipvs.ApplySysctls(ipvs.Sysctls(settings.StrictARP)); err != nil {
		return k, err
	}
	if err := ipvs.SetTimeouts(settings.Timeouts); err != nil {
		log.Error("IPVS timeouts not set; the kernel's stay", zap.Error(err))
	}
	setUpConntrack(log, settings.Conntrack)
	return k, nil
}

// setUpConntrack sizes the conntrack table and sets its timeouts, as
// upstream does at start-up; a failure (a read-only /sys or /proc in a
// container) is one Warning, and the kernel's values stay.
func setUpConntrack(log *zap.Logger, ct conntrack.Settings) {
	want := ct.Max(conntrack.NodeCPUs())
	if err := conntrack.RaiseMax(want); err != nil {
		log.Warn("conntrack table not grown", zap.Error(err))
	}
	if err := conntrack.GrowHashTable(want); err != nil {
		log.Warn("conntrack hash table not grown", zap.Error(err))
	}
	if err := ipvs.ApplySysctls(ct.Sysctls()); err != nil {
		log.Warn("conntrack settings not applied", zap.Error(err))
	}
}
