package framework

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a proxier (ours or upstream kube-proxy) running as a child.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	exited  chan error
}

// Start runs bin with args, logging to the artifacts directory.
func Start(e *Env, name, bin string, args ...string) (*Process, error) {
	return start(e, name, exec.Command(bin, args...))
}

// StartChrooted runs bin, a path inside root, with root as its / and the
// environment env: a container image's files, as a runtime would run them
// with the host's network and mounts bound in by the caller.
func StartChrooted(e *Env, name, root string, env []string, bin string, args ...string) (*Process, error) {
	return start(e, name, Chrooted(root, env, bin, args...))
}

// Chrooted is the command bin, a path inside root, run with root as its /
// and the environment env.
func Chrooted(root string, env []string, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir, cmd.Env = "/", env
	return cmd
}

func start(e *Env, name string, cmd *exec.Cmd) (*Process, error) {
	bin, args := cmd.Path, cmd.Args[1:]
	logPath := filepath.Join(e.Artifacts, name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "=== %s %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(append([]string{bin}, args...), " "))
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait(); log.Close() }()
	return p, nil
}

// StartOurs runs kube-ipvs-proxy as system:kube-proxy, the least-privileged identity.
func StartOurs(e *Env, name string, extra ...string) (*Process, error) {
	return Start(e, name, filepath.Join(e.Bin, "kube-ipvs-proxy"), OursArgs(e, extra...)...)
}

// OursArgs are kube-ipvs-proxy's arguments in the tests: extra after the
// identity and node name.
func OursArgs(e *Env, extra ...string) []string {
	return append([]string{"--kubeconfig", e.Kubeconfig("proxy"), "--hostname-override", NodeName, "-v", "4"}, extra...)
}

// StartUpstream runs kube-proxy (v$K8S_VERSION, 1.37 by default) in IPVS mode, the oracle.
func StartUpstream(e *Env, name string, extra ...string) (*Process, error) {
	return StartUpstreamMode(e, name, "ipvs", extra...)
}

// StartUpstreamMode runs kube-proxy in mode: ipvs, iptables or nftables.
func StartUpstreamMode(e *Env, name, mode string, extra ...string) (*Process, error) {
	args := append([]string{"--kubeconfig", e.Kubeconfig("proxy"), "--hostname-override", NodeName, "--proxy-mode", mode}, extra...)
	return Start(e, name, filepath.Join(e.KBin, "kube-proxy"), args...)
}

// Stop sends SIGTERM and waits for the process to exit. Stopping a process
// that has already ended is not an error.
func (p *Process) Stop() error {
	if done, _ := p.Exited(); done {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if ee, ok := err.(*exec.ExitError); ok && ee.Sys().(syscall.WaitStatus).Signaled() {
			return nil
		}
		return err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		return fmt.Errorf("%s did not stop within 30s", p.Name)
	}
}

// Kill sends SIGKILL, as the OOM killer or a node crash would, and waits
// for the process to be gone.
func (p *Process) Kill() {
	if done, _ := p.Exited(); done {
		return
	}
	_ = p.cmd.Process.Kill()
	err := <-p.exited
	p.exited <- err
}

// Exited reports whether the process has ended (and why).
func (p *Process) Exited() (bool, error) {
	select {
	case err := <-p.exited:
		p.exited <- err
		return true, err
	default:
		return false, nil
	}
}

// Series is one scrape of a metrics server: the value of each sample line,
// keyed by its name and labels as printed ("name{a=\"b\"}").
type Series map[string]float64

// Scrape reads the metrics of the proxier serving on 127.0.0.1:10249 (ours
// and upstream's default address).
func Scrape() (Series, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("metrics: %s", resp.Status)
	}
	out := Series{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

// Metric reads every series of one metric, whatever its labels (upstream
// labels some by IP family).
func Metric(name string) ([]float64, error) {
	all, err := Scrape()
	if err != nil {
		return nil, err
	}
	var out []float64
	for k, v := range all {
		if k == name || strings.HasPrefix(k, name+"{") {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("metric %s not found", name)
	}
	return out, nil
}

// WaitSynced waits until the proxier on 127.0.0.1:10249 reports a sync newer than since.
func WaitSynced(p *Process, since time.Time, timeout time.Duration) error {
	return Eventually(timeout, 200*time.Millisecond, func() error {
		if done, err := p.Exited(); done {
			return fmt.Errorf("%s exited: %v (see %s)", p.Name, err, p.LogPath)
		}
		series, err := Metric("kubeproxy_sync_proxy_rules_last_timestamp_seconds")
		if err != nil {
			return err
		}
		for _, v := range series {
			if v < float64(since.Unix()) {
				return fmt.Errorf("%s has not synced since %s", p.Name, since.Format(time.RFC3339))
			}
		}
		return nil
	})
}

// Usage is a process's CPU time so far and its resident memory now.
type Usage struct {
	CPU   time.Duration
	RSSMB float64
}

// Usage reads /proc for the process; it fails once the process has ended.
// CPU includes the children it has waited for: a proxier's iptables-restore
// and ipset runs are its work.
func (p *Process) Usage() (Usage, error) { return usage(p.cmd.Process.Pid, true) }

// SelfUsage is Usage for this process, without children (the bench's own
// tool runs are not the in-process proxier's work).
func SelfUsage() (Usage, error) { return usage(os.Getpid(), false) }

func usage(pid int, children bool) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	if len(f) < 22 {
		return u, fmt.Errorf("short /proc stat for pid %d", pid)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	rssPages, _ := strconv.ParseInt(f[21], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	ticksUsed := utime + stime
	if children {
		cutime, _ := strconv.ParseInt(f[13], 10, 64)
		cstime, _ := strconv.ParseInt(f[14], 10, 64)
		ticksUsed += cutime + cstime
	}
	u.CPU = time.Duration(ticksUsed) * time.Second / ticks
	u.RSSMB = float64(rssPages*int64(os.Getpagesize())) / (1 << 20)
	return u, nil
}
