package app

import (
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/view"
)

// stateSource is the running proxier's view of its state.
type stateSource interface {
	State(names ...types.NamespacedName) view.State
}

// stateHandler serves /debug/state: the desired state, what the kernel is
// believed to hold and the failed objects, as JSON; ?service=ns/name (which
// may repeat) limits it to those Services. It names every Service and
// backend, so unless remote it answers only clients on the node itself.
func stateHandler(p stateSource, remote bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !remote && !fromNode(r) {
			http.Error(w, "/debug/state answers only on the node (loopback or the node's address it is bound to); see --debug-state-remote", http.StatusForbidden)
			return
		}
		var names []types.NamespacedName
		for _, s := range r.URL.Query()["service"] {
			ns, name, ok := strings.Cut(s, "/")
			if !ok || ns == "" || name == "" {
				http.Error(w, "service: want namespace/name, got "+s, http.StatusBadRequest)
				return
			}
			names = append(names, types.NamespacedName{Namespace: ns, Name: name})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.State(names...))
	})
}

// fromNode says whether r comes from the node itself: from loopback, or
// from the very address it reached, which only the node's own sockets
// use (the kernel gives a connection to a local address that address as
// its source; an outside client could not complete the handshake with it).
func fromNode(r *http.Request) bool {
	from, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	if from.Addr().Unmap().IsLoopback() {
		return true
	}
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	to, err := netip.ParseAddrPort(local.String())
	return err == nil && to.Addr().Unmap() == from.Addr().Unmap()
}
