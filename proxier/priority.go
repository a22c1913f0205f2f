package proxier

import (
	"runtime"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// readKernelInBackground reads the kernel for a drift check on a thread of
// its own at the lowest CPU priority. At 50k Services a read keeps a CPU busy
// for seconds, mostly in the kernel's side of its dumps, and changes must not
// queue behind it for a CPU. The thread is never handed back to the Go
// runtime (the goroutine ends locked to it), so no other goroutine inherits
// the priority. Adoption, which holds the proxier's mutex, runs at normal
// priority on the caller's thread.
func (p *Proxier) readKernelInBackground() kernelRead {
	done := make(chan kernelRead, 1)
	go func() {
		runtime.LockOSThread()
		if err := lowerThreadPriority(); err != nil {
			p.log.Debug("drift check read at normal priority", zap.Error(err))
		}
		done <- p.readKernel(false)
	}()
	return <-done
}

// backgroundNice is the nice value of the drift check's reading thread: the
// lowest priority, so that it runs on what CPU the syncs leave.
const backgroundNice = 19

// lowerThreadPriority sets the calling thread's nice value; on Linux
// setpriority with a thread id applies to that thread alone. The caller
// must be locked to its thread.
func lowerThreadPriority() error {
	return unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), backgroundNice)
}
