package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCachesSyncedAtReadsEachLogForm: the moment the caches synced is found
// in ours' JSON log (as the bench runs it), in an older build's zap console
// log, and in kube-proxy's klog text as the later of its two lines.
func TestCachesSyncedAtReadsEachLogForm(t *testing.T) {
	start := time.Date(2026, 11, 29, 16, 4, 52, 0, time.UTC)
	want := time.Date(2026, 11, 29, 16, 4, 56, 281_000_000, time.UTC)
	ts := fmt.Sprintf("%.3f", float64(want.UnixMicro())/1000)
	for name, log := range map[string]string{
		"json": `{"ts":` + ts + `,"caller":"proxier/proxier.go:253","msg":"skipping sync: informer caches not synced yet","v":4}` + "\n" +
			`{"ts":` + ts + `,"caller":"proxier/proxier.go:268","msg":"informer caches synced; first sync","v":0}`,
		"zap": "2026-11-29T16:04:56.281Z\tinfo\tproxier/proxier.go:268\tinformer caches synced; first sync",
		"klog": "I1129 16:04:55.100000       1 shared_informer.go:356] \"Caches are synced\" controller=\"service config\"\n" +
			"I1129 16:04:56.281000       1 shared_informer.go:356] \"Caches are synced\" controller=\"endpoint slice config\"",
	} {
		path := filepath.Join(t.TempDir(), name+".log")
		if err := os.WriteFile(path, []byte(log+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, ok := cachesSyncedAt(path, start)
		if !ok || got.Sub(want).Abs() > time.Millisecond {
			t.Errorf("%s: %v, %v; want %v", name, got, ok, want)
		}
	}
}
