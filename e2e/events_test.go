//go:build e2e

package e2e

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/e2e/framework"
)

// TestHostileServiceWarnsOnce: a Service with a 200 KB scheduler annotation
// and fifteen IPv6 external IPs on an IPv4 Service still answers, and gets
// one Warning Event, its note cut to what events.k8s.io/v1 accepts (the
// whole text would be refused, and the Event lost); the proxier's log line
// about it stays short.
func TestHostileServiceWarnsOnce(t *testing.T) {
	t.Parallel()
	p := ourProxier(t)
	const ns = "hostile"
	mustNamespace(t, ns)
	a := mustPod(t, "hostile-a", "10.244.48.1", true)
	svc, slice := webService(ns, "10.96.48.10", a)
	svc.Annotations = map[string]string{desired.SchedulerAnnotation: strings.Repeat("x", 200_000)}
	for i := range 15 {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, fmt.Sprintf("2001:db8::%x", i+1))
	}
	mustApply(t, svc, slice)
	waitAnswerSet(t, framework.NodeHTTP, ap("10.96.48.10:80"), "hostile-a", 2, 30*time.Second)
	eventually(t, "one Warning with a note the apiserver took", 30*time.Second, func() error {
		events, err := env.Events(ns)
		if err != nil {
			return err
		}
		if len(events) != 1 || !strings.HasPrefix(events[0], "web InvalidService ") {
			return fmt.Errorf("events %.300q", events)
		}
		if n := len(events[0]) - len("web InvalidService "); n > 1024 {
			return fmt.Errorf("a note of %d bytes", n)
		}
		return nil
	})
	f, err := os.Open(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		if l := lines.Text(); strings.Contains(l, "xxxxxxxxxx") && len(l) > 4096 {
			t.Errorf("a log line of %d bytes quotes the annotation", len(l))
		}
	}
}
