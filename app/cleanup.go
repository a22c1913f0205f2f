package app

import (
	"net/netip"

	"go.uber.org/zap"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/conntrack"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// cleanup is --cleanup: it removes our kernel objects and returns, with no
// apiserver. A part of the kernel it cannot open (no IPVS module, no
// ip6tables) holds nothing of ours, and is skipped with one line.
func cleanup(log *zap.Logger, excluded []netip.Prefix) error {
	link := dummyiface.NewNetlink(dummyiface.DefaultLinkName)
	k := proxier.CleanupKernel{Link: link, Routes: link, Conntrack: conntrack.Netlink{}}
	if v, err := ipvs.NewNetlink(); err == nil {
		defer v.Close()
		k.IPVS = v
	} else {
		log.Info("no IPVS to clean up", zap.Error(err))
	}
	if s, err := ipset.NewNetlink(); err == nil {
		k.Sets = s
	} else {
		log.Info("no ipsets to clean up", zap.Error(err))
	}
	for _, open := range []func() (iptables.Exec, error){iptables.NewIPv4, iptables.NewIPv6} {
		if ipt, err := open(); err == nil {
			k.IPTables = append(k.IPTables, ipt)
		} else {
			log.Info("no iptables to clean up", zap.Error(err))
		}
	}
	if err := proxier.Cleanup(k, excluded); err != nil {
		return err
	}
	log.Info("cleaned up: virtual servers, kube-ipvs0, ipsets and iptables chains of ours are gone",
		zap.Stringers("keptVirtualServersIn", excluded))
	return nil
}
