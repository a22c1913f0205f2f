package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// apiserver is the kube-apiserver process, which the VM may ask to stop and
// start again (the outage test).
type apiserver struct {
	bin, log string
	args     []string
	url      string
	caPEM    []byte

	mu  sync.Mutex
	cmd *exec.Cmd
}

// start runs kube-apiserver, appending to its log, and waits until it is ready.
func (a *apiserver) start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		return nil
	}
	out, err := os.OpenFile(a.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, a.bin, a.args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	out.Close() // the child keeps its own descriptor
	a.cmd = cmd
	if err := waitReady(ctx, a.url, a.caPEM); err != nil {
		return fmt.Errorf("%w (see %s)", err, a.log)
	}
	return nil
}

// stop ends kube-apiserver as a node's shutdown would (SIGTERM first).
func (a *apiserver) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cmd != nil {
		stopProcess(a.cmd)
		a.cmd = nil
	}
}

// control answers the VM's requests. The VM writes DIR/request as
// "ID COMMAND [ARG]"; the answer goes to DIR/reply as "ID ok" or
// "ID error: ...". DIR is in the checkout, the one directory the VM shares
// read-write with this machine. Commands:
//
//	stop-apiserver, start-apiserver
//	etcd-delete KEY   (a change made while no apiserver runs, as another
//	                  apiserver of an HA control plane would make it)
type control struct {
	dir  string
	api  *apiserver
	etcd string // etcd's client URL
}

// reset makes the directory and removes a previous run's request and reply.
func (c *control) reset() error {
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"request", "reply"} {
		if err := os.Remove(filepath.Join(c.dir, f)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

// serve polls for requests until ctx ends.
func (c *control) serve(ctx context.Context) {
	request := filepath.Join(c.dir, "request")
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		data, err := os.ReadFile(request)
		if err != nil || string(data) == last {
			continue
		}
		last = string(data)
		id, cmd, _ := strings.Cut(strings.TrimSpace(last), " ")
		answer := "ok"
		if err := c.do(ctx, cmd); err != nil {
			answer = "error: " + err.Error()
		}
		fmt.Fprintf(os.Stderr, "testcluster: %s: %s\n", cmd, answer)
		tmp := filepath.Join(c.dir, "reply.tmp")
		if os.WriteFile(tmp, []byte(id+" "+answer+"\n"), 0o644) == nil {
			_ = os.Rename(tmp, filepath.Join(c.dir, "reply"))
		}
	}
}

func (c *control) do(ctx context.Context, cmd string) error {
	name, arg, _ := strings.Cut(cmd, " ")
	switch name {
	case "stop-apiserver":
		c.api.stop()
		return nil
	case "start-apiserver":
		return c.api.start(ctx)
	case "etcd-delete":
		return c.etcdDelete(ctx, arg)
	}
	return fmt.Errorf("unknown command %q", name)
}

// etcdDelete deletes one key through etcd's JSON gateway, which saves a
// client library for one call. A key that is not there is an error.
func (c *control) etcdDelete(ctx context.Context, key string) error {
	body, _ := json.Marshal(map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(key))})
	req, err := http.NewRequestWithContext(ctx, "POST", c.etcd+"/v3/kv/deleterange", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Deleted string `json:"deleted"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		return fmt.Errorf("etcd delete %s: status %d, %v", key, resp.StatusCode, err)
	}
	if out.Deleted != "1" {
		return fmt.Errorf("etcd delete %s: no such key", key)
	}
	return nil
}
