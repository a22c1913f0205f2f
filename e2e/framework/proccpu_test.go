package framework

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCPUOfStatReadsOwnAndChildTicks(t *testing.T) {
	// A command with a space and a parenthesis, as /proc prints it.
	line := "871 (kube (proxy)) S 1 871 871 0 -1 4194560 5012 7342 0 0 3010 2000 15000 2500 20 0 9 0 1234 0 0"
	own, children, err := cpuOfStat(line)
	if err != nil || own != 50.1 || children != 175 {
		t.Errorf("cpuOfStat = %v, %v, %v; want 50.1, 175", own, children, err)
	}
	if _, _, err := cpuOfStat("871 (kube-proxy) S 1"); err == nil {
		t.Error("a short line read without error")
	}
}

func TestCPUByCommandCountsThisProcess(t *testing.T) {
	// Burn 1.2 CPU seconds: commands under 1 s are left out.
	for {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		if time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) > 1200*time.Millisecond {
			break
		}
	}
	if out := cpuByCommand(); !strings.Contains(out, filepath.Base(os.Args[0])[:min(15, len(filepath.Base(os.Args[0])))]) {
		t.Errorf("this test's process is not among\n%s", out)
	}
}
