package framework

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Output runs a command and returns its standard output.
func Output(args ...string) (string, error) {
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return "", fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// State is the kernel state a drop-in must reproduce, normalized to sorted lines.
type State struct {
	IPVS      string // ipvsadm -Sn
	IPSets    string // ipset save, without the random initval
	Addresses string // addresses on kube-ipvs0
	IPTables  string // iptables-save by table and chain (see chainOrder)
	IP6Tables string // ip6tables-save, the same way
}

var (
	initval  = regexp.MustCompile(` initval 0x[0-9a-f]+`)
	counters = regexp.MustCompile(`\[\d+:\d+\]`)
)

func sortedLines(s string, keep func(string) bool) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, " ")
		if l != "" && (keep == nil || keep(l)) {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// ReadState reads the kernel through the standard tools, as an operator would.
func ReadState() (State, error) {
	var st State
	ipvs, err := Output("ipvsadm", "-Sn")
	if err != nil {
		return st, err
	}
	st.IPVS = sortedLines(ipvs, nil)
	sets, err := Output("ipset", "save")
	if err != nil {
		return st, err
	}
	st.IPSets = sortedLines(initval.ReplaceAllString(sets, ""), nil)
	addrs, err := Output("ip", "-o", "addr", "show", "dev", "kube-ipvs0")
	if err != nil {
		return st, err
	}
	var a []string
	for _, l := range strings.Split(addrs, "\n") {
		if f := strings.Fields(l); len(f) >= 4 {
			a = append(a, f[2]+" "+f[3])
		}
	}
	st.Addresses = sortedLines(strings.Join(a, "\n"), nil)
	ipt, err := Output("iptables-save")
	if err != nil {
		return st, err
	}
	st.IPTables = chainOrder(counters.ReplaceAllString(ipt, ""))
	ip6t, err := Output("ip6tables-save")
	if err != nil {
		return st, err
	}
	st.IP6Tables = chainOrder(counters.ReplaceAllString(ip6t, ""))
	return st, nil
}

// chainOrder normalizes iptables-save's output: tables and chains sorted by
// name, and each chain's rules in their own order, which decides what a
// packet meets first (a RETURN before a mark, say). The order in which
// chains were created, which iptables-save shows, is not compared, nor the
// order of a chain whose rules all DROP: there it decides nothing, and
// upstream writes KUBE-IPVS-OUT-FILTER's in its map's order.
func chainOrder(saved string) string {
	var out []string
	rules := map[string][]string{} // "table chain" → its rules, in order
	table := ""
	for _, l := range strings.Split(saved, "\n") {
		l = strings.TrimRight(l, " ")
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":"):
			out = append(out, table+" "+l)
		case strings.HasPrefix(l, "-A "):
			chain, _, _ := strings.Cut(l[3:], " ")
			rules[table+" "+chain] = append(rules[table+" "+chain], l)
		}
	}
	sort.Strings(out)
	var chains []string
	for c := range rules {
		chains = append(chains, c)
	}
	sort.Strings(chains)
	for _, c := range chains {
		table, _, _ := strings.Cut(c, " ")
		if !slices.ContainsFunc(rules[c], func(r string) bool { return !strings.HasSuffix(r, " -j DROP") }) {
			sort.Strings(rules[c])
		}
		for _, r := range rules[c] {
			out = append(out, table+" "+r)
		}
	}
	return strings.Join(out, "\n")
}

// CleanKernel removes every trace of a service proxy: iptables chains and
// jumps, ipsets, the IPVS table, kube-ipvs0 and the nftables mode's
// tables. Only for tests.
func CleanKernel() error {
	for _, tool := range []string{"iptables", "ip6tables"} {
		saved, err := Output(tool + "-save")
		if err != nil {
			return err
		}
		var keep []string
		for _, l := range strings.Split(saved, "\n") {
			if !strings.Contains(l, "KUBE-") {
				keep = append(keep, l)
			}
		}
		cmd := exec.Command(tool + "-restore")
		cmd.Stdin = strings.NewReader(strings.Join(keep, "\n") + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s-restore: %w: %s", tool, err, out)
		}
	}
	sets, err := Output("ipset", "list", "-n")
	if err != nil {
		return err
	}
	for _, s := range strings.Fields(sets) {
		if strings.HasPrefix(s, "KUBE-") {
			if out, err := exec.Command("ipset", "destroy", s).CombinedOutput(); err != nil {
				return fmt.Errorf("ipset destroy %s: %w: %s", s, err, out)
			}
		}
	}
	if out, err := exec.Command("ipvsadm", "-C").CombinedOutput(); err != nil {
		return fmt.Errorf("ipvsadm -C: %w: %s", err, out)
	}
	_ = exec.Command("ip", "link", "del", "kube-ipvs0").Run()
	// kube-proxy's nftables mode keeps everything in its own tables.
	for _, family := range []string{"ip", "ip6"} {
		_ = exec.Command("nft", "delete", "table", family, "kube-proxy").Run()
	}
	return nil
}

// NodePortListeners lists the TCP sockets listening on a port of the
// NodePort range (the health-check node ports), one "tcp4 0.0.0.0:30295"
// per line, sorted: tcp4 and tcp6 are IPv4 and IPv6-only sockets, "tcp" one
// that takes both families.
func NodePortListeners() (string, error) {
	out, err := Output("ss", "-Hltn")
	if err != nil {
		return "", err
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		i := strings.LastIndexByte(f[3], ':')
		port, err := strconv.Atoi(f[3][i+1:])
		if i < 0 || err != nil || port < 30000 || port > 32767 {
			continue
		}
		host, network := f[3][:i], "tcp4"
		switch {
		case host == "*":
			network = "tcp"
		case strings.HasPrefix(host, "["):
			network = "tcp6"
		}
		lines = append(lines, network+" "+f[3])
	}
	return sortedLines(strings.Join(lines, "\n"), nil), nil
}
