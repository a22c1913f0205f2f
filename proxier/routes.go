package proxier

import (
	"net/netip"
	"slices"
	"sync"

	"go.uber.org/zap"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
)

// With --ipvs-vip-mode=local-route, one route of type local (through lo,
// see dummyiface.Router) makes each Service CIDR, of either family, the
// node's own, instead of an address bound per cluster IP: the kernel walks
// a link's address list on every add, so at 50k Services binding them is
// most of a cold start. Every
// address of the CIDR is then local, allocated or not; KUBE-IPVS-FILTER
// rejects new connections to those no Service port lets through (package
// glue). The route goes in before the addresses inside it are unbound, as
// the node's facts only name a CIDR routed once its route is in place. A
// ServiceCIDR is deleted only once no cluster IP is allocated from it (the
// apiserver's finalizer), so its route can go at once.

// serviceCIDRs is what the ServiceCIDR informer last said.
type serviceCIDRs struct {
	mu     sync.Mutex
	want   []netip.Prefix // the CIDRs, sorted (IPv4 first)
	listed bool
	// failed is the last failure to set the routes, "" if none (the sync
	// goroutine's alone).
	failed string
}

// OnServiceCIDRs takes every ServiceCIDR's CIDRs (informers.Start).
func (p *Proxier) OnServiceCIDRs(cidrs []string) {
	var want []netip.Prefix
	for _, c := range cidrs {
		pre, err := netip.ParsePrefix(c)
		if err != nil || !slices.Contains(p.families(), desired.FamilyOf(pre.Addr())) {
			continue // a family the node does not serve: its kernel may refuse the route
		}
		if !slices.Contains(want, pre.Masked()) {
			want = append(want, pre.Masked())
		}
	}
	slices.SortFunc(want, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	p.cidrs.mu.Lock()
	changed := !p.cidrs.listed || !slices.Equal(want, p.cidrs.want)
	p.cidrs.want, p.cidrs.listed = want, true
	p.cidrs.mu.Unlock()
	if changed {
		p.runner.Trigger()
	}
}

// syncRoutes puts the wanted local routes in place and, once they are,
// names the routed CIDRs in the node's facts, so that the Services inside
// them are recomputed without their addresses (or with them again). It
// runs on the sync goroutine before the inputs are taken. When a write
// fails, the facts name the wanted CIDRs whose routes are in place (one
// family's refused route leaves the other routed), and the rest is
// retried at the next sync; the failure is logged when it changes.
func (p *Proxier) syncRoutes() {
	if !p.cfg.LocalRoutes {
		return
	}
	p.cidrs.mu.Lock()
	want, listed := p.cidrs.want, p.cidrs.listed
	p.cidrs.mu.Unlock()
	if !listed || slices.Equal(want, p.nodeIPs.current.Routed) {
		return
	}
	router, ok := p.kernel.Links.(dummyiface.Router)
	if !ok {
		return
	}
	routed := want
	if err := router.SetLocalRoutes(want); err != nil {
		if err.Error() != p.cidrs.failed {
			p.log.Warn("could not set the Service CIDRs' local routes; the cluster IPs of those without one stay bound", zap.Error(err))
			p.cidrs.failed = err.Error()
		}
		have, lerr := router.LocalRoutes()
		if lerr != nil {
			return
		}
		routed = slices.DeleteFunc(slices.Clone(want), func(c netip.Prefix) bool { return !slices.Contains(have, c) })
	} else {
		p.cidrs.failed = ""
	}
	if slices.Equal(routed, p.nodeIPs.current.Routed) {
		return
	}
	p.log.Info("Service CIDRs routed locally", zap.Stringers("cidrs", routed))
	p.nodeIPs.current.Routed = routed
	p.changeTracker.touch(func(*desired.Service) bool { return true })
}

// dropLocalRoutes deletes, in the default mode, the local routes a proxier
// in local-route mode left: after the first sync, which has bound the
// addresses they made local.
func (p *Proxier) dropLocalRoutes() {
	router, ok := p.kernel.Links.(dummyiface.Router)
	if p.cfg.LocalRoutes || !ok {
		return
	}
	left, err := router.LocalRoutes()
	if err == nil && len(left) > 0 {
		err = router.SetLocalRoutes(nil)
		if err == nil {
			p.log.Info("deleted the local routes of --ipvs-vip-mode=local-route; every cluster IP is bound again", zap.Stringers("cidrs", left))
		}
	}
	if err != nil {
		p.log.Warn("could not delete the local routes --ipvs-vip-mode=local-route left", zap.Error(err))
	}
}
