package framework

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// proxierCPU says how much CPU the proxier in the network namespace at
// netns (a node's) has used: its own, and that of the child processes it
// ran and reaped (kube-proxy's ipset and iptables runs, which its own
// process_cpu_seconds_total leaves out), as one line:
//
//	kube-proxy pid 871: own 50.1 s, child processes 175.0 s
func proxierCPU(netns string) (string, error) {
	var want syscall.Stat_t
	if err := syscall.Stat(netns, &want); err != nil {
		return "", err
	}
	for _, p := range processes() {
		if p.comm != "kube-proxy" && p.comm != "kube-ipvs-proxy" {
			continue
		}
		var ns syscall.Stat_t
		if syscall.Stat(filepath.Join(p.dir, "ns/net"), &ns) == nil && ns.Ino == want.Ino && ns.Dev == want.Dev {
			return fmt.Sprintf("%s pid %s: own %.1f s, child processes %.1f s", p.comm, filepath.Base(p.dir), p.own, p.children), nil
		}
	}
	return "", fmt.Errorf("no kube-proxy or kube-ipvs-proxy process in %s", netns)
}

// process is one live process: its /proc directory, command name, and CPU
// seconds, its own and its reaped children's.
type process struct {
	dir, comm     string
	own, children float64
}

// processes reads every live process's /proc/PID/stat; one that ends
// meanwhile, or that cannot be read, is left out.
func processes() []process {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []process
	for _, d := range dirs {
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		line := string(stat)
		open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
		own, children, err := cpuOfStat(line)
		if err != nil || open < 0 || end < open {
			continue
		}
		out = append(out, process{dir: d, comm: line[open+1 : end], own: own, children: children})
	}
	return out
}

// cpuOfStat reads utime+stime and cutime+cstime, in seconds, from a
// /proc/PID/stat line (in clock ticks of 1/100 s, Linux's USER_HZ).
func cpuOfStat(line string) (own, children float64, err error) {
	i := strings.LastIndexByte(line, ')') // the command may hold spaces and parentheses
	if i < 0 {
		return 0, 0, fmt.Errorf("no command in %q", line)
	}
	f := strings.Fields(line[i+1:]) // f[0] is the state, field 3
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("%d fields after the command", len(f))
	}
	var ticks [4]float64 // fields 14 to 17: utime, stime, cutime, cstime
	for j := range ticks {
		if ticks[j], err = strconv.ParseFloat(f[11+j], 64); err != nil {
			return 0, 0, err
		}
	}
	return (ticks[0] + ticks[1]) / 100, (ticks[2] + ticks[3]) / 100, nil
}

// cpuByCommand sums, by command name, the CPU the VM's live processes have
// used, their own and their reaped children's, most first: where a run's
// CPU went (kubelets, containerds, proxiers), one line each.
func cpuByCommand() string {
	by := map[string]float64{}
	for _, p := range processes() {
		by[p.comm] += p.own + p.children
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(by[b], by[a]) })
	var b strings.Builder
	for _, n := range names {
		if by[n] >= 1 {
			fmt.Fprintf(&b, "%8.1f s  %s\n", by[n], n)
		}
	}
	return b.String()
}
