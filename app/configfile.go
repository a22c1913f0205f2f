package app

import (
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	kevents "github.com/kube-ipvs-proxy/kube-ipvs-proxy/events"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxyconfig"
)

// logConfigFile says what of the configuration file is not used, one line
// each, as soon as the logger exists: before --write-config-to or a failing
// kubeconfig can end the run.
func logConfigFile(log *zap.Logger, f *proxyconfig.File) {
	if f == nil {
		return
	}
	if len(f.Unknown) > 0 {
		log.Warn("--config has fields KubeProxyConfiguration does not know; they are ignored", zap.Strings("fields", f.Unknown))
	}
	if len(f.Ignored) > 0 {
		log.Info("--config sets fields of other proxy modes, or unused by kube-proxy too; IPVS mode ignores them", zap.Strings("fields", f.Ignored))
	}
}

// eventConfigFile posts an Event for unknown fields, which are likely typos,
// once the client exists.
func eventConfigFile(poster *kevents.Poster, node *v1.ObjectReference, f *proxyconfig.File) {
	if f != nil && len(f.Unknown) > 0 {
		poster.Announce(node, v1.EventTypeWarning, "UnknownConfigFields", "LoadConfig",
			"kube-ipvs-proxy ignored unknown fields in its configuration file: "+strings.Join(f.Unknown, ", "))
	}
}
