//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// TestSchedulerAnnotation: a Service's scheduler annotation sets its virtual
// server's scheduler in the kernel, for each of kube-proxy's schedulers; an
// edit to it changes the scheduler in place, and an unknown value falls back to the node's scheduler with one
// InvalidService event while the Service keeps answering.
func TestSchedulerAnnotation(t *testing.T) {
	t.Parallel()
	ourProxier(t)
	const ns = "scheduler"
	mustNamespace(t, ns)
	a := mustPod(t, "sched-a", "10.244.27.1", true)
	client := mustPod(t, "sched-client", "10.244.27.100", false)
	svc, slice := webService(ns, "10.96.27.10", a)
	svc.Annotations = map[string]string{desired.SchedulerAnnotation: "wlc"}
	mustApply(t, svc, slice)
	vip := ap("10.96.27.10:80")
	key := ipvs.Key{Address: vip.Addr(), Protocol: ipvs.TCP, Port: 80}
	wantScheduler := func(want string) {
		t.Helper()
		eventually(t, "scheduler "+want, 30*time.Second, func() error {
			vs, ok, err := kernelIPVS(t).GetVirtualServer(key)
			if err != nil || !ok || vs.Scheduler != want {
				return fmt.Errorf("virtual server %+v, present %v, %v", vs, ok, err)
			}
			return nil
		})
	}
	wantScheduler("wlc")
	waitAnswerSet(t, client.HTTP, vip, "sched-a", 4, 30*time.Second)

	// Every scheduler kube-proxy accepts, in the kernel; mh hashes the
	// source port too, as upstream.
	for _, s := range desired.Schedulers {
		svc.Annotations[desired.SchedulerAnnotation] = s
		mustApply(t, svc)
		wantScheduler(s)
		vs, _, err := kernelIPVS(t).GetVirtualServer(key)
		if port := vs.Flags&ipvs.FlagSchedPort != 0; err != nil || port != (s == "mh") {
			t.Errorf("scheduler %s: source-port hashing flag %v (%v)", s, port, err)
		}
	}
	waitAnswerSet(t, client.HTTP, vip, "sched-a", 2, 10*time.Second)
	svc.Annotations[desired.SchedulerAnnotation] = "sh"
	mustApply(t, svc)
	wantScheduler("sh")

	svc.Annotations[desired.SchedulerAnnotation] = "fastest"
	mustApply(t, svc)
	wantScheduler("rr") // the node's: the proxier runs with the default
	waitAnswerSet(t, client.HTTP, vip, "sched-a", 4, 10*time.Second)
	eventually(t, "an InvalidService event naming the annotation", 10*time.Second, func() error {
		events, err := env.Events(ns)
		if err != nil {
			return err
		}
		n := 0
		for _, e := range events {
			if strings.HasPrefix(e, "web InvalidService ") && strings.Contains(e, `unknown scheduler "fastest"`) {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%d such events in %v", n, events)
		}
		return nil
	})
}
