package proxier

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// claimKind says how a Service came to want a virtual server.
type claimKind uint8

const (
	viaClusterIP claimKind = iota
	viaNodePort
	viaExternalIP
	viaLoadBalancer
)

func (k claimKind) String() string {
	return [...]string{"cluster IP", "node port", "external IP", "load-balancer ingress IP"}[k]
}

// allocated says whether the apiserver hands the address out once per
// cluster (cluster IPs, node ports), where a tenant writes external and
// ingress IPs freely (CVE-2020-8554).
func (k claimKind) allocated() bool { return k == viaClusterIP || k == viaNodePort }

// claim is one Service's claim on one virtual server.
type claim struct {
	service types.NamespacedName
	kind    claimKind
	created time.Time
	uid     types.UID
}

// rank orders claims of different strength; the lower wins. An allocated
// address beats a written one, and a written one of kube-system or default,
// where the cluster's own Services live, beats another namespace's.
func (c claim) rank() int {
	switch {
	case c.kind.allocated():
		return 0
	case c.service.Namespace == "kube-system" || c.service.Namespace == v1.NamespaceDefault:
		return 1
	default:
		return 2
	}
}

// beats says whether c wins over d: the stronger claim, then the older
// Service, then the lower UID. Never the name, which an attacker picks.
func (c claim) beats(d claim) bool {
	if c.rank() != d.rank() {
		return c.rank() < d.rank()
	}
	if !c.created.Equal(d.created) {
		return c.created.Before(d.created)
	}
	if c.uid != d.uid {
		return c.uid < d.uid
	}
	return c.service.String() < d.service.String() // only without UIDs: tests, hand-made objects
}

// claims decides which Service gets a virtual server that more than one
// wants. The loser's virtual server and the set entries and blocked rules
// that name the same address, protocol and port are left out of its state,
// so no Service can steer or firewall traffic meant for another. When the
// winner lets go, the next claim in line takes over.
type claims struct {
	byKey map[ipvs.Key][]claim // the first is the winner
	keys  map[types.NamespacedName][]ipvs.Key
	// conflicting counts the losing claims.
	conflicting int
}

func newClaims() *claims {
	return &claims{byKey: map[ipvs.Key][]claim{}, keys: map[types.NamespacedName][]ipvs.Key{}}
}

// set replaces the claims of svc (nil: deleted) from the virtual servers
// of st, and returns the other Services that won or lost a virtual server
// by it: their states must be filtered again.
func (cs *claims) set(name types.NamespacedName, svc *v1.Service, st serviceState) []types.NamespacedName {
	// Only a key with another claimant can change hands: its winner is
	// noted before, and compared after.
	type shared struct {
		key ipvs.Key
		was types.NamespacedName
	}
	var watch []shared
	note := func(k ipvs.Key, others int) {
		if l := cs.byKey[k]; len(l) > others && !slices.ContainsFunc(watch, func(s shared) bool { return s.key == k }) {
			watch = append(watch, shared{k, l[0].service})
		}
	}
	for _, k := range cs.keys[name] {
		note(k, 1)
		cs.drop(k, name)
	}
	keys := cs.keys[name][:0]
	for _, v := range st.virtualServers {
		k := v.vs.Key
		note(k, 0)
		c := claim{service: name, kind: v.via}
		if svc != nil {
			c.created, c.uid = svc.CreationTimestamp.Time, svc.UID
		}
		if cs.add(k, c) {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		cs.keys[name] = keys
	} else {
		delete(cs.keys, name)
	}
	var touched []types.NamespacedName
	for _, w := range watch {
		var now types.NamespacedName
		if l := cs.byKey[w.key]; len(l) > 0 {
			now = l[0].service
		}
		if now == w.was {
			continue
		}
		for _, n := range [2]types.NamespacedName{w.was, now} {
			if n != name && n.Name != "" {
				touched = append(touched, n)
			}
		}
	}
	return touched
}

// add puts c in k's line, keeping a Service's strongest claim on k only,
// and reports whether the Service had no claim on k before.
func (cs *claims) add(k ipvs.Key, c claim) bool {
	l := cs.byKey[k]
	had := false
	for i, d := range l {
		if d.service == c.service {
			if !c.beats(d) {
				return false
			}
			if len(l) > 1 {
				cs.conflicting-- // counted again below if still shared
			}
			l, had = append(l[:i], l[i+1:]...), true
			break
		}
	}
	i := 0
	for i < len(l) && l[i].beats(c) {
		i++
	}
	l = slices.Insert(l, i, c)
	cs.byKey[k] = l
	if len(l) > 1 {
		cs.conflicting++
	}
	return !had
}

// drop removes name's claim on k.
func (cs *claims) drop(k ipvs.Key, name types.NamespacedName) {
	l := cs.byKey[k]
	for i, d := range l {
		if d.service != name {
			continue
		}
		if len(l) > 1 {
			cs.conflicting--
		}
		if len(l) == 1 {
			delete(cs.byKey, k)
			return
		}
		cs.byKey[k] = append(l[:i:i], l[i+1:]...)
		return
	}
}

// conflict is one virtual server a Service wanted and lost.
type conflict struct {
	key         ipvs.Key
	kind        claimKind
	winner      types.NamespacedName
	winnerClaim claimKind
}

func (c conflict) String() string {
	return fmt.Sprintf("%s %s:%d/%s is also claimed by %s (its %s), which takes it; not programmed for this Service",
		c.kind, c.key.Address, c.key.Port, c.key.Protocol, c.winner, c.winnerClaim)
}

// filter returns st without the virtual servers name lost, nor the set
// entries and blocked rules that name them, and the conflicts. st itself
// is returned, unchanged, when name lost nothing.
func (cs *claims) filter(name types.NamespacedName, st serviceState) (serviceState, []conflict) {
	var lost []conflict
	for _, v := range st.virtualServers {
		if l := cs.byKey[v.vs.Key]; len(l) > 1 && l[0].service != name {
			lost = append(lost, conflict{key: v.vs.Key, kind: v.via, winner: l[0].service, winnerClaim: l[0].kind})
		}
	}
	if len(lost) == 0 {
		return st, nil
	}
	isLost := make(map[ipvs.Key]bool, len(lost))
	for _, c := range lost {
		isLost[c.key] = true
	}
	names := func(e ipset.Entry) bool {
		if !e.IP.IsValid() || e.Port == 0 {
			return false
		}
		for _, p := range []ipvs.Protocol{ipvs.TCP, ipvs.UDP, ipvs.SCTP} {
			if strings.EqualFold(e.Protocol, string(p)) && isLost[ipvs.Key{Address: e.IP, Protocol: p, Port: e.Port}] {
				return true
			}
		}
		return false
	}
	out := st
	out.virtualServers = nil
	for _, v := range st.virtualServers {
		if !isLost[v.vs.Key] {
			out.virtualServers = append(out.virtualServers, v)
		}
	}
	out.entries = nil
	for _, e := range st.entries {
		if !names(e.entry) {
			out.entries = append(out.entries, e)
		}
	}
	out.nodeBlocked = nil
	for _, e := range st.nodeBlocked {
		if !names(e) {
			out.nodeBlocked = append(out.nodeBlocked, e)
		}
	}
	return out, lost
}

// conflictProblems describes lost virtual servers for the operator, a few
// by name: a Service with hundreds of ports and addresses can lose them all.
func conflictProblems(lost []conflict) []string {
	const named = 3
	var out []string
	for i, c := range lost {
		if i == named {
			out = append(out, fmt.Sprintf("and %d more virtual servers claimed by other Services", len(lost)-named))
			break
		}
		out = append(out, c.String())
	}
	return out
}
