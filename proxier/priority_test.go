package proxier

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// threadNice is the calling thread's nice value (getpriority(2) answers 20 - nice).
func threadNice(t *testing.T) int {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		t.Fatal(err)
	}
	return 20 - prio
}

// niceProbe notes the nice value of the thread that lists virtual servers.
type niceProbe struct {
	*ipvs.Fake
	t    *testing.T
	seen *int
}

func (p niceProbe) VirtualServers() ([]ipvs.VirtualServer, error) {
	*p.seen = threadNice(p.t)
	return p.Fake.VirtualServers()
}

func TestBackgroundReadRunsAtLowestPriorityOnItsOwnThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadNice(t)
	p, k, _, _ := newTestProxier(t)
	seen := -100
	p.rec.ipvs = niceProbe{k.ipvs, t, &seen}

	r := p.readKernelInBackground()
	if r.err != nil || r.view == nil {
		t.Fatalf("read failed: %v", r.err)
	}
	if seen != backgroundNice {
		t.Fatalf("kernel read at nice %d, want %d", seen, backgroundNice)
	}
	if now := threadNice(t); now != before {
		t.Fatalf("the caller's thread went from nice %d to %d", before, now)
	}
	// Goroutines started afterwards do not inherit it: the read's thread died
	// with its goroutine.
	for range 20 {
		done := make(chan int)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			done <- threadNice(t)
		}()
		if n := <-done; n == backgroundNice {
			t.Fatal("a later goroutine ran on the lowered thread")
		}
	}
}
