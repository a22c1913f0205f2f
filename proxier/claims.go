package proxier

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// claim is one Service's claim on one virtual server.
type claim struct {
	service types.NamespacedName
	kind    desired.Via
	created time.Time
	uid     types.UID
}

// rank orders claims of different strength; the lower wins. An allocated
// address beats a written one; kube-system's and default's written claims,
// where the cluster's own Services live, beat other namespaces'; and an
// ingress IP, which only a holder of services/status writes, beats an
// external IP, which any Service editor writes.
func (c claim) rank() int {
	if c.kind.Allocated() {
		return 0
	}
	r := 1
	if c.service.Namespace != "kube-system" && c.service.Namespace != v1.NamespaceDefault {
		r += 2
	}
	if c.kind == desired.ViaExternalIP {
		r++
	}
	return r
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
//
// An address that is a Service's cluster IP is that Service's on every
// port: another Service's external or ingress IP on it loses even on a
// port the cluster IP does not serve, so that no tenant adds ports to
// another's Service (a DNS-over-TLS port on the cluster DNS address, say).
type claims struct {
	byKey map[ipvs.Key][]claim // the first is the winner
	keys  map[types.NamespacedName][]ipvs.Key
	// clusterIPs holds the Services of each address that is a cluster IP,
	// written the Services with an external or ingress IP on each address,
	// and addrs each Service's addresses of both kinds.
	clusterIPs, written map[netip.Addr][]types.NamespacedName
	addrs               map[types.NamespacedName]claimedAddrs
	// lost counts each Service's lost virtual servers as of its last
	// filter; conflicting is their sum.
	lost        map[types.NamespacedName]int
	conflicting int
}

// claimedAddrs are one Service's cluster IPs and written addresses.
type claimedAddrs struct{ cluster, written []netip.Addr }

func newClaims() *claims {
	return &claims{byKey: map[ipvs.Key][]claim{}, keys: map[types.NamespacedName][]ipvs.Key{},
		clusterIPs: map[netip.Addr][]types.NamespacedName{}, written: map[netip.Addr][]types.NamespacedName{},
		addrs: map[types.NamespacedName]claimedAddrs{}, lost: map[types.NamespacedName]int{}}
}

// update replaces the claims of svc (nil: deleted) from the virtual servers
// of st, and returns the other Services that won or lost a virtual server
// by it: their states must be filtered again.
func (cs *claims) update(name types.NamespacedName, svc *desired.Service, st desired.State) []types.NamespacedName {
	touched := cs.setAddrs(name, st)
	// Only a key with another claimant can change hands: its winner is
	// noted before, and compared after.
	was := map[ipvs.Key]types.NamespacedName{}
	note := func(k ipvs.Key, others int) {
		if l := cs.byKey[k]; len(l) > others {
			if _, ok := was[k]; !ok {
				was[k] = l[0].service
			}
		}
	}
	for _, k := range cs.keys[name] {
		note(k, 1)
		cs.drop(k, name)
	}
	keys := cs.keys[name][:0]
	for _, v := range st.VirtualServers {
		k := v.Virtual.Key
		note(k, 0)
		c := claim{service: name, kind: v.Via}
		if svc != nil {
			c.created, c.uid = svc.Created, svc.UID
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
	for k, before := range was {
		var now types.NamespacedName
		if l := cs.byKey[k]; len(l) > 0 {
			now = l[0].service
		}
		if now == before {
			continue
		}
		for _, n := range [2]types.NamespacedName{before, now} {
			if n != name && n.Name != "" {
				touched = append(touched, n)
			}
		}
	}
	return touched
}

// setAddrs replaces name's cluster IPs and written addresses, and returns
// the Services with a written address on a cluster IP that came or went.
func (cs *claims) setAddrs(name types.NamespacedName, st desired.State) []types.NamespacedName {
	var now claimedAddrs
	for _, v := range st.VirtualServers {
		list := &now.written
		if v.Via == desired.ViaClusterIP {
			list = &now.cluster
		} else if v.Via == desired.ViaNodePort {
			continue
		}
		if a := v.Virtual.Key.Address; !slices.Contains(*list, a) {
			*list = append(*list, a)
		}
	}
	old := cs.addrs[name]
	var touched []types.NamespacedName
	for _, a := range symmetricDifference(old.cluster, now.cluster) {
		for _, n := range cs.written[a] {
			if n != name {
				touched = append(touched, n)
			}
		}
	}
	index(cs.clusterIPs, name, old.cluster, now.cluster)
	index(cs.written, name, old.written, now.written)
	if len(now.cluster)+len(now.written) > 0 {
		cs.addrs[name] = now
	} else {
		delete(cs.addrs, name)
	}
	return touched
}

// index moves name from the lists of old's addresses to those of now's.
func index(m map[netip.Addr][]types.NamespacedName, name types.NamespacedName, old, now []netip.Addr) {
	for _, a := range old {
		if l := slices.DeleteFunc(m[a], func(n types.NamespacedName) bool { return n == name }); len(l) > 0 {
			m[a] = l
		} else {
			delete(m, a)
		}
	}
	for _, a := range now {
		m[a] = append(m[a], name)
	}
}

func symmetricDifference(a, b []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, x)
		}
	}
	return out
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
			l, had = append(l[:i], l[i+1:]...), true
			break
		}
	}
	i := 0
	for i < len(l) && l[i].beats(c) {
		i++
	}
	cs.byKey[k] = slices.Insert(l, i, c)
	return !had
}

// drop removes name's claim on k.
func (cs *claims) drop(k ipvs.Key, name types.NamespacedName) {
	l := slices.DeleteFunc(cs.byKey[k], func(c claim) bool { return c.service == name })
	if len(l) == 0 {
		delete(cs.byKey, k)
	} else {
		cs.byKey[k] = l
	}
}

// conflict is one virtual server a Service wanted and lost.
type conflict struct {
	key         ipvs.Key
	kind        desired.Via
	winner      types.NamespacedName
	winnerClaim desired.Via
}

func (c conflict) String() string {
	return fmt.Sprintf("%s %s:%d/%s is also claimed by %s (its %s), which takes it; not programmed for this Service",
		c.kind, c.key.Address, c.key.Port, c.key.Protocol, c.winner, c.winnerClaim)
}

// filter returns st without the virtual servers name lost, nor the set
// entries and blocked rules that name them, and the conflicts. st itself
// is returned, unchanged, when name lost nothing.
func (cs *claims) filter(name types.NamespacedName, st desired.State) (desired.State, []conflict) {
	var lost []conflict
	var isLost map[ipvs.Key]bool
	for _, v := range st.VirtualServers {
		c := conflict{key: v.Virtual.Key, kind: v.Via}
		if owner, ok := cs.clusterIPOfAnother(name, v); ok {
			c.winner, c.winnerClaim = owner, desired.ViaClusterIP
		} else if l := cs.byKey[v.Virtual.Key]; len(l) > 1 && l[0].service != name {
			c.winner, c.winnerClaim = l[0].service, l[0].kind
		} else {
			continue
		}
		if isLost[c.key] {
			continue // wanted twice: as an external and an ingress IP, say
		}
		if isLost == nil {
			isLost = map[ipvs.Key]bool{}
		}
		isLost[c.key] = true
		lost = append(lost, c)
	}
	cs.conflicting += len(lost) - cs.lost[name]
	if len(lost) == 0 {
		delete(cs.lost, name)
		return st, nil
	}
	cs.lost[name] = len(lost)
	names := func(e ipset.Entry) bool {
		if !e.IP.IsValid() || e.Port == 0 {
			return false
		}
		for _, p := range []ipvs.Protocol{ipvs.TCP, ipvs.UDP, ipvs.SCTP} {
			if e.Protocol == objects.EntryProtocolOf(p) && isLost[ipvs.Key{Address: e.IP, Protocol: p, Port: e.Port}] {
				return true
			}
		}
		return false
	}
	out := st
	out.VirtualServers = nil
	for _, v := range st.VirtualServers {
		if !isLost[v.Virtual.Key] {
			out.VirtualServers = append(out.VirtualServers, v)
		}
	}
	out.Entries = nil
	for _, e := range st.Entries {
		if !names(e.Entry) {
			out.Entries = append(out.Entries, e)
		}
	}
	out.NodeBlocked = nil
	for _, e := range st.NodeBlocked {
		if !names(e) {
			out.NodeBlocked = append(out.NodeBlocked, e)
		}
	}
	return out, lost
}

// clusterIPOfAnother returns the Service whose cluster IP v's written
// address (an external or ingress IP) is, if it is another Service's.
func (cs *claims) clusterIPOfAnother(name types.NamespacedName, v desired.VirtualServer) (types.NamespacedName, bool) {
	if v.Via.Allocated() {
		return types.NamespacedName{}, false
	}
	for _, n := range cs.clusterIPs[v.Virtual.Key.Address] {
		if n != name {
			return n, true
		}
	}
	return types.NamespacedName{}, false
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
