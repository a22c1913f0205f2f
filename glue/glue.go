package glue

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// FirewallJumpComment marks our jumps to KUBE-PROXY-FIREWALL, a chain
// kube-proxy's iptables mode jumps to as well, with a comment of its own.
const FirewallJumpComment = "kube-proxy firewall rules"

// jumpRule is one rule in a built-in chain that hands packets to our chains.
type jumpRule struct {
	table, chain string
	rule         []string
}

func comment(c string) []string { return []string{"-m", "comment", "--comment", c} }

// jumpRules are listed in the order they appear in their chains, as
// upstream kube-proxy leaves them.
func jumpRules() []jumpRule {
	j := func(table, chain, c, target string) jumpRule {
		return jumpRule{table, chain, append(comment(c), "-j", target)}
	}
	return []jumpRule{
		j("nat", "PREROUTING", "kubernetes service portals", "KUBE-SERVICES"),
		j("nat", "OUTPUT", "kubernetes service portals", "KUBE-SERVICES"),
		j("nat", "POSTROUTING", "kubernetes postrouting rules", "KUBE-POSTROUTING"),
		j("filter", "INPUT", "kubernetes ipvs access filter", "KUBE-IPVS-FILTER"),
		j("filter", "INPUT", FirewallJumpComment, "KUBE-PROXY-FIREWALL"),
		j("filter", "INPUT", "kubernetes health check rules", "KUBE-NODE-PORT"),
		j("filter", "FORWARD", FirewallJumpComment, "KUBE-PROXY-FIREWALL"),
		j("filter", "FORWARD", "kubernetes forwarding rules", "KUBE-FORWARD"),
		j("filter", "OUTPUT", "kubernetes ipvs access filter", "KUBE-IPVS-OUT-FILTER"),
	}
}

// Chains are the chains the glue owns, by table, in the order it
// declares them.
var Chains = map[string][]string{
	"nat":    {"KUBE-SERVICES", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-NODE-PORT", "KUBE-LOAD-BALANCER"},
	"filter": {"KUBE-FORWARD", "KUBE-NODE-PORT", "KUBE-PROXY-FIREWALL", "KUBE-SOURCE-RANGES-FIREWALL", "KUBE-IPVS-FILTER", "KUBE-IPVS-OUT-FILTER"},
}

// setRules are the rules that match on one set, written (as upstream does)
// only while some Service wants an entry in it, in this order.
var setRules = []struct {
	set, table, chain, proto, match, target string
}{
	{desired.SetLoopBack, "nat", "KUBE-POSTROUTING", "", "dst,dst,src", "MASQUERADE"},
	{desired.SetLoadBalancer, "nat", "KUBE-SERVICES", "", "dst,dst", "KUBE-LOAD-BALANCER"},
	{desired.SetLoadBalancerLocal, "nat", "KUBE-LOAD-BALANCER", "", "dst,dst", "RETURN"},
	{desired.SetNodePortLocalTCP, "nat", "KUBE-NODE-PORT", "tcp", "dst", "RETURN"},
	{desired.SetNodePortTCP, "nat", "KUBE-NODE-PORT", "tcp", "dst", "KUBE-MARK-MASQ"},
	{desired.SetNodePortLocalUDP, "nat", "KUBE-NODE-PORT", "udp", "dst", "RETURN"},
	{desired.SetNodePortUDP, "nat", "KUBE-NODE-PORT", "udp", "dst", "KUBE-MARK-MASQ"},
	{desired.SetNodePortLocalSCTP, "nat", "KUBE-NODE-PORT", "sctp", "dst,dst", "RETURN"},
	{desired.SetNodePortSCTP, "nat", "KUBE-NODE-PORT", "sctp", "dst,dst", "KUBE-MARK-MASQ"},
	{desired.SetLoadBalancerFW, "filter", "KUBE-PROXY-FIREWALL", "", "dst,dst", "KUBE-SOURCE-RANGES-FIREWALL"},
	{desired.SetLoadBalancerSourceNet, "filter", "KUBE-SOURCE-RANGES-FIREWALL", "", "dst,dst,src", "RETURN"},
	{desired.SetLoadBalancerSourceIP, "filter", "KUBE-SOURCE-RANGES-FIREWALL", "", "dst,dst,src", "RETURN"},
}

// Sets are the sets whose emptiness changes the chains.
func Sets() []string {
	out := []string{desired.SetClusterIP, desired.SetExternalIP, desired.SetExternalIPLocal}
	for _, r := range setRules {
		out = append(out, r.set)
	}
	return out
}

func setComment(name string) string {
	for _, s := range desired.IPv4Sets {
		if s.Name == name {
			return s.Comment
		}
	}
	return ""
}

// gluePayload renders one family's chains for iptables-restore (or
// ip6tables-restore), rule for rule as upstream kube-proxy writes them, and
// inserts the jumps missing from the built-in chains. The chains depend on
// configuration and on Input: per-Service matching happens in the
// ipsets, so a Service change rewrites iptables only when it fills a set or
// empties it. The blocked VIPs' chain is edited apart (blocked.go): the
// payload declares it only when blocked says so, and carries its edits.
func gluePayload(cfg *Config, fam desired.Family, missing []jumpRule, in Input, blocked blockedPlan) []byte {
	// A set in use that the kernel refused is left out like an unused one.
	inUse := in.InUse
	if len(in.Missing) > 0 {
		inUse = maps.Clone(in.InUse)
		for s := range in.Missing {
			delete(inUse, s)
		}
	}
	loopback, reject := "127.0.0.0/8", "icmp-port-unreachable"
	if fam == desired.IPv6 {
		loopback, reject = "::1/128", "icmp6-port-unreachable"
	}
	mark := fmt.Sprintf("%#x", 1<<cfg.MasqueradeBit)
	markMask := mark + "/" + mark
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	// Each jump goes to the top of its chain, so the list is walked
	// backwards to end in upstream's order.
	inserts := func(table string) {
		for i := len(missing) - 1; i >= 0; i-- {
			if j := missing[i]; j.table == table {
				w("-I %s 1 %s", j.chain, iptables.RuleSpec(j.rule))
			}
		}
	}
	const masqComment = `-m comment --comment "Kubernetes service cluster ip + port for masquerade purpose"`
	w("*nat")
	for _, c := range Chains["nat"] {
		w(":%s - [0:0]", c)
	}
	setRule := func(table string) {
		for _, r := range setRules {
			if r.table != table || !inUse[r.set] {
				continue
			}
			proto := ""
			if r.proto != "" {
				proto = " -p " + r.proto
			}
			w(`-A %s%s -m comment --comment %q -m set --match-set %s %s -j %s`, r.chain, proto, setComment(r.set), fam.SetName(r.set), r.match, r.target)
		}
	}
	// Node-local clients reach services from loopback; leave them to the kernel.
	w("-A KUBE-SERVICES -s %s -j RETURN", loopback)
	setRule("nat")
	w("-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ")
	w("-A KUBE-MARK-MASQ -j MARK --or-mark %s", mark)
	w("-A KUBE-POSTROUTING -m mark ! --mark %s -j RETURN", markMask)
	w("-A KUBE-POSTROUTING -j MARK --xor-mark %s", mark)
	w(`-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`)
	notLocal := cfg.notLocal(fam, in.PodCIDR)
	clusterIPs := fam.SetName(desired.SetClusterIP)
	switch {
	case !inUse[desired.SetClusterIP]:
	case cfg.MasqueradeAll:
		w("-A KUBE-SERVICES %s -m set --match-set %s dst,dst -j KUBE-MARK-MASQ", masqComment, clusterIPs)
	case notLocal != "":
		w("-A KUBE-SERVICES %s %s -m set --match-set %s dst,dst -j KUBE-MARK-MASQ", notLocal, masqComment, clusterIPs)
	default:
		// Without a way to tell pods' traffic, only node traffic from a
		// service address is masqueraded (upstream's rule).
		w("-A KUBE-SERVICES %s -m set --match-set %s src,dst -j KUBE-MARK-MASQ", masqComment, clusterIPs)
	}
	// External IPs: masqueraded with policy Cluster, and accepted from
	// off the node or when the address is the node's own.
	for _, set := range []string{desired.SetExternalIP, desired.SetExternalIPLocal} {
		if !inUse[set] {
			continue
		}
		match := fmt.Sprintf("-A KUBE-SERVICES -m comment --comment %q -m set --match-set %s dst,dst", setComment(set), fam.SetName(set))
		if set == desired.SetExternalIP {
			w("%s -j KUBE-MARK-MASQ", match)
		}
		w("%s -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT", match)
		w("%s -m addrtype --dst-type LOCAL -j ACCEPT", match)
	}
	w("-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT")
	for _, set := range []string{desired.SetClusterIP, desired.SetLoadBalancer} {
		if inUse[set] {
			w("-A KUBE-SERVICES -m set --match-set %s dst,dst -j ACCEPT", fam.SetName(set))
		}
	}
	inserts("nat")
	w("COMMIT")
	w("*filter")
	for _, c := range Chains["filter"] {
		if c != blockedChain || blocked.declare {
			w(":%s - [0:0]", c)
		}
	}
	setRule("filter")
	w(`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark %s -j ACCEPT`, markMask)
	w(`-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT`)
	// The filter rejects new connections to a VIP that no Service port
	// answers: without one of the sets it lets through, it would reject a
	// Service's own traffic, so it waits for all of them.
	filtered := []string{desired.SetLoadBalancer, desired.SetClusterIP, desired.SetExternalIP, desired.SetExternalIPLocal}
	if !slices.ContainsFunc(append(filtered, desired.SetHealthCheckNodePort, desired.SetIPVSIPs), func(s string) bool { return in.Missing[s] }) {
		for _, s := range filtered {
			w("-A KUBE-IPVS-FILTER -m set --match-set %s dst,dst -j RETURN", fam.SetName(s))
		}
		w("-A KUBE-IPVS-FILTER -m set --match-set %s dst -j RETURN", fam.SetName(desired.SetHealthCheckNodePort))
		w("-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set %s dst -j REJECT --reject-with %s", fam.SetName(desired.SetIPVSIPs), reject)
		for _, p := range in.Routed {
			w("-A KUBE-IPVS-FILTER -d %s -m conntrack --ctstate NEW -j REJECT --reject-with %s", p, reject)
		}
	}
	if !in.Missing[desired.SetHealthCheckNodePort] {
		w(`-A KUBE-NODE-PORT -m comment --comment "Kubernetes health check node port" -m set --match-set %s dst -j ACCEPT`, fam.SetName(desired.SetHealthCheckNodePort))
	}
	w("-A KUBE-SOURCE-RANGES-FIREWALL -j DROP")
	for _, l := range blocked.edits {
		w("%s", l)
	}
	inserts("filter")
	w("COMMIT")
	return b.Bytes()
}

// Glue keeps one family's chains and the jumps to them in place. It reads
// iptables-save first and runs iptables-restore only when a jump is missing
// or our chains differ from how iptables-save printed them after our last
// write: each process costs ~0.15 s in the test VM, and a quiet drift check
// then runs one instead of two.
type Glue struct {
	ipt iptables.Interface // iptables or ip6tables
	fam desired.Family
	cfg *Config

	// inMu guards in and known, apart from mu, so that a sync's Use never
	// waits for a drift check's iptables processes.
	inMu sync.Mutex
	// in is what the chains depend on; known says a sync has said so
	// (Use), rather than Guess.
	in    Input
	known bool
	// gen counts the changes to in, and wroteGen is the one the chains
	// were last brought in line with: a sync that may not write them (see
	// Rewrite) leaves them behind, for a later write to catch up.
	gen, wroteGen uint64

	mu sync.Mutex
	// written is our chains as iptables-save printed them after our last
	// restore, in the order it printed them; empty while unknown (before the
	// first write, after a failed one, or when the write was not read back).
	written string
	// wroteIn is what the last restore's chains depended on.
	wroteIn Input
	// wroteBlocked are the blocked VIPs the last restore left rules for;
	// blockedKnown says it succeeded.
	wroteBlocked []objects.Entry
	blockedKnown bool
	// failed says the last run of iptables failed.
	failed bool
	// quiet marks the last run that found the chains as wanted, by the
	// nftables generation read before its iptables-save and the gen of in
	// it wanted: while neither has moved, no table and nothing we want
	// changed, and a run needs no iptables at all (see
	// iptables.NFTGeneration). Zero when unknown.
	quiet quietMark
}

// quietMark is a run that found the chains as wanted (Glue.quiet).
type quietMark struct {
	kernelGen uint32
	inGen     uint64
	set       bool
}

// generations is what an iptables that counts its tables' changes offers
// (the nft backend's Exec).
type generations interface {
	Generation() (gen uint32, ok bool, err error)
}

// kernelGeneration is the tables' generation, if the backend tells it.
func (g *Glue) kernelGeneration() (uint32, bool) {
	t, ok := g.ipt.(generations)
	if !ok {
		return 0, false
	}
	gen, ok, err := t.Generation()
	return gen, ok && err == nil
}

// New returns the glue of family fam's chains, written through ipt
// (iptables or ip6tables).
func New(ipt iptables.Interface, fam desired.Family, cfg Config) *Glue {
	return &Glue{ipt: ipt, fam: fam, cfg: &cfg}
}

// Family is the IP family of the chains.
func (g *Glue) Family() desired.Family { return g.fam }

// ErrFailing is Rewrite's answer while the chains' last write failed.
var ErrFailing = errors.New("the last write of the iptables chains failed; the kernel setup's retry writes them")

// ErrBusy is Rewrite's answer while another goroutine runs iptables.
var ErrBusy = errors.New("iptables is running for a drift check or a retry")

// Ensure rewrites our chains and inserts the missing jumps in one
// iptables-restore, unless nothing differs; the blocked VIPs' rules are
// edited one by one in the same restore. readBack reads our chains back
// after a rewrite, one more process, so that the next call can skip its
// restore. drifted reports a rewrite of chains that had been in place.
func (g *Glue) Ensure(readBack bool) (drifted bool, took Times, err error) {
	return g.run(readBack)
}

// Rewrite is Ensure for a sync, which does not wait on another goroutine's
// iptables run (a drift check's or a retry's, which may hang until its
// deadline): while one runs it returns ErrBusy, the chains stay behind,
// and the sync that run's end triggers catches up. (RewriteAhead waits a
// little, for the rules that must precede an apply.) When the last run
// failed it returns ErrFailing, and the chains wait for the kernel
// setup's retry.
func (g *Glue) Rewrite() (drifted bool, took Times, err error) {
	if !g.mu.TryLock() {
		return false, took, ErrBusy
	}
	defer g.mu.Unlock()
	if g.failed {
		return false, took, ErrFailing
	}
	return g.runLocked(time.Now(), true)
}

// aheadWait bounds how long a write ahead of the apply waits for another
// goroutine's iptables run (a drift check's takes well under a second):
// the rules it writes must be in place before the virtual servers answer.
const aheadWait = 2 * time.Second

// RewriteAhead is Rewrite for the rules a sync writes ahead of its apply:
// while another run holds the chains it tries again, for up to aheadWait,
// then answers ErrBusy as Rewrite does, so a hung iptables still
// cannot hold a sync back for long.
func (g *Glue) RewriteAhead() (drifted bool, took Times, err error) {
	deadline := time.Now().Add(aheadWait)
	for {
		drifted, took, err = g.Rewrite()
		if !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			return drifted, took, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (g *Glue) run(readBack bool) (drifted bool, took Times, err error) {
	start := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runLocked(start, readBack)
}

func (g *Glue) runLocked(start time.Time, readBack bool) (drifted bool, took Times, err error) {
	took.Lock = time.Since(start)
	kernelGen, counted := g.kernelGeneration()
	g.inMu.Lock()
	inGen, known := g.gen, g.known
	g.inMu.Unlock()
	if counted && known && g.quiet == (quietMark{kernelGen, inGen, true}) {
		g.succeeded(inGen)
		return false, took, nil
	}
	g.quiet = quietMark{}
	g.failed = true // until it succeeds
	lap := func(d *time.Duration) { *d = time.Since(start) }
	saved, err := g.ipt.Save()
	lap(&took.Save)
	if err != nil {
		return false, took, err
	}
	present := map[string]bool{}
	for _, l := range strings.Split(string(saved), "\n") {
		present[l] = true
	}
	var missing []jumpRule
	for _, j := range jumpRules() {
		if !present["-A "+j.chain+" "+iptables.RuleSpec(j.rule)] {
			missing = append(missing, j)
		}
	}
	have, clean := savedBlocked(saved)
	g.inMu.Lock()
	if !g.known {
		// Until a sync says which VIPs are blocked, keep those found.
		g.in.NodeBlocked = have
	}
	in, gen, known := g.in, g.gen, g.known
	g.inMu.Unlock()
	blocked := planBlocked(have, clean, in.NodeBlocked)
	payload := gluePayload(g.cfg, g.fam, missing, in, blocked)
	ours := ourChains(saved, payload)
	asWritten := len(missing) == 0 && g.written != "" && ours == g.written && in.sameButBlocked(g.wroteIn)
	if asWritten && blocked.none() {
		if counted && known {
			g.quiet = quietMark{kernelGen, gen, true}
		}
		g.succeeded(gen)
		return false, took, nil
	}
	// Drift is a change in the kernel, not in what we want.
	drifted = g.written != "" && (ours != g.written || len(missing) > 0) ||
		g.blockedKnown && (!clean || !slices.Equal(have, g.wroteBlocked))
	written := g.written
	if asWritten {
		payload = blocked.payload() // our other chains stay as they are
	}
	g.written, g.blockedKnown, g.wroteIn, g.wroteBlocked = "", false, in, in.NodeBlocked
	err = g.ipt.Restore(payload)
	lap(&took.Restore)
	if err != nil {
		return drifted, took, err
	}
	g.blockedKnown = true
	g.succeeded(gen)
	switch {
	case asWritten:
		g.written = written
	case readBack:
		if saved, err := g.ipt.Save(); err == nil {
			g.written = ourChains(saved, payload)
		}
		lap(&took.ReadBack)
	}
	return drifted, took, nil
}

// succeeded records a run that left the chains as of in's generation gen.
func (g *Glue) succeeded(gen uint64) {
	g.failed = false
	g.inMu.Lock()
	defer g.inMu.Unlock()
	g.wroteGen = max(g.wroteGen, gen)
}

// Behind says whether what the chains depend on changed since they were
// last brought in line with it.
func (g *Glue) Behind() bool {
	g.inMu.Lock()
	defer g.inMu.Unlock()
	return g.wroteGen != g.gen
}

// Times are the steps of one Ensure, each counted from its call: the
// wait for the lock, iptables-save, iptables-restore (0 if none was
// needed) and the read-back save (0 if none).
type Times struct{ Lock, Save, Restore, ReadBack time.Duration }

// Use records what the chains depend on, and reports whether that changed
// them, so that Ensure must rewrite them.
func (g *Glue) Use(in Input) bool {
	g.inMu.Lock()
	defer g.inMu.Unlock()
	in.Missing = g.in.Missing // SetMissing's
	changed := !in.equal(g.in)
	g.in, g.known = in, true
	if changed {
		g.gen++
	}
	return changed
}

// Missing are the sets SetMissing last recorded.
func (g *Glue) Missing() map[string]bool {
	g.inMu.Lock()
	defer g.inMu.Unlock()
	return g.in.Missing
}

// SetMissing records the sets, by their IPv4 names, that the kernel
// refused to create, whose rules wait for them, and reports whether that
// changed the chains.
func (g *Glue) SetMissing(sets map[string]bool) bool {
	g.inMu.Lock()
	defer g.inMu.Unlock()
	if sameSets(sets, g.in.Missing) {
		return false
	}
	g.in.Missing = sets
	g.gen++
	return true
}

// Grow returns what the chains depend on with want's sets in use and
// blocked VIPs added to them, and whether that added any. Before Use is
// first called, it adds to the guess.
func (g *Glue) Grow(want Input) (Input, bool) {
	g.inMu.Lock()
	defer g.inMu.Unlock()
	next, grew := g.in, false
	for s := range want.InUse {
		if !next.InUse[s] {
			if !grew {
				next.InUse = maps.Clone(next.InUse)
				if next.InUse == nil {
					next.InUse = map[string]bool{}
				}
			}
			next.InUse[s], grew = true, true
		}
	}
	var more bool
	next.NodeBlocked, more = mergeBlocked(next.NodeBlocked, want.NodeBlocked)
	if !next.PodCIDR.IsValid() {
		next.PodCIDR = want.PodCIDR
	}
	return next, grew || more
}

// Guessing says whether Use has not been called yet.
func (g *Glue) Guessing() bool {
	g.inMu.Lock()
	defer g.inMu.Unlock()
	return !g.known
}

// Guess sets the sets in use from the kernel's sets, until Use is first
// called: at start-up, before any Service is known, the chains are written
// for the sets a previous proxier filled, so that a restart leaves them as
// they were rather than dropping their rules until the first sync.
func (g *Glue) Guess(sets map[string]bool) {
	g.inMu.Lock()
	defer g.inMu.Unlock()
	if !g.known {
		g.in.InUse = sets
	}
}

// ourChains picks out of iptables-save's output the chains a glue payload
// declares, table by table: their declarations and their rules. The
// blocked VIPs' chain is compared rule by rule instead (savedBlocked).
func ourChains(saved, payload []byte) string {
	ours := map[string]bool{} // "table chain"
	table := ""
	for _, l := range strings.Split(string(payload), "\n") {
		if t, ok := strings.CutPrefix(l, "*"); ok {
			table = t
		} else if rest, ok := strings.CutPrefix(l, ":"); ok {
			if chain, _, _ := strings.Cut(rest, " "); chain != blockedChain {
				ours[table+" "+chain] = true
			}
		}
	}
	var b strings.Builder
	table = ""
	for _, l := range strings.Split(string(saved), "\n") {
		chain := ""
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
			continue
		case strings.HasPrefix(l, ":"):
			chain, _, _ = strings.Cut(l[1:], " ")
			l = ":" + chain // without policy and counters
		case strings.HasPrefix(l, "-A "):
			chain, _, _ = strings.Cut(l[3:], " ")
		}
		if chain != "" && ours[table+" "+chain] {
			b.WriteString(table + " " + l + "\n")
		}
	}
	return b.String()
}
