package framework

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Cluster asks testcluster, on the host, to run one command and waits for
// its answer: "stop-apiserver", "start-apiserver" (it answers once the
// apiserver is ready) or "etcd-delete KEY". See e2e/testcluster/control.go.
func (e *Env) Cluster(cmd string) error {
	if e.Control == "" {
		return errors.New("KIP_CONTROL is not set: run under testcluster -control (make e2e does)")
	}
	// The VM makes the directory: hack/vm.sh empties .vm/ as it starts.
	if err := os.MkdirAll(e.Control, 0o755); err != nil {
		return err
	}
	id := strconv.FormatInt(time.Now().UnixNano(), 10)
	tmp := filepath.Join(e.Control, "request.tmp")
	if err := os.WriteFile(tmp, []byte(id+" "+cmd+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(e.Control, "request")); err != nil {
		return err
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		reply, _ := os.ReadFile(filepath.Join(e.Control, "reply"))
		answer, ok := strings.CutPrefix(strings.TrimSpace(string(reply)), id+" ")
		if !ok {
			continue
		}
		if answer != "ok" {
			return fmt.Errorf("testcluster %s: %s", cmd, answer)
		}
		return nil
	}
	return fmt.Errorf("testcluster %s: no answer after 2m", cmd)
}

// refuseAPIServer is what a node's kernel gets back from the apiserver's
// host while nothing listens on the port: a reset to its SYN, so connect()
// fails with "connection refused". QEMU's user network accepts every guest
// connection itself before it tries the host, so the VM would otherwise see
// a connection that opens, then closes. Only SYNs are refused: open
// connections end as the stopping apiserver ends them.
var refuseAPIServer = []string{"OUTPUT", "-d", "10.0.2.100", "-p", "tcp", "--dport", "6443", "--syn",
	"-j", "REJECT", "--reject-with", "tcp-reset"}

// StopAPIServer stops kube-apiserver; connections to it are refused until
// StartAPIServer.
func (e *Env) StopAPIServer() error {
	if out, err := exec.Command("iptables", append([]string{"-I"}, refuseAPIServer...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("refuse connections to the apiserver: %v: %s", err, out)
	}
	return e.Cluster("stop-apiserver")
}

// StartAPIServer starts kube-apiserver again and returns once it is ready.
func (e *Env) StartAPIServer() error {
	if err := e.Cluster("start-apiserver"); err != nil {
		return err
	}
	if out, err := exec.Command("iptables", append([]string{"-D"}, refuseAPIServer...)...).CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "does a matching rule exist") {
		return fmt.Errorf("accept connections to the apiserver: %v: %s", err, out)
	}
	return nil
}
