package app

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/leftovers"
)

// removeLeftovers removes what kube-proxy's iptables and nftables modes
// left on the node, once our first sync has programmed it: until then their
// rules keep answering. While our chains are not written yet (their first
// write failed) it tries again every period; a failure is logged once,
// and retried the same way.
func removeLeftovers(ctx context.Context, log *zap.Logger, ipts []iptables.Interface, period time.Duration) {
	logged := false
	for {
		err := leftovers.Remove(log, ipts, leftovers.Netlink{})
		var notYet leftovers.NotYet
		switch {
		case err == nil:
			return
		case errors.As(err, &notYet) || logged:
			log.Debug("kube-proxy's other modes' leftovers not removed yet", zap.Error(err))
		default:
			log.Error("kube-proxy's other modes' leftovers not removed; retrying every sync period", zap.Error(err))
			logged = true
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}
