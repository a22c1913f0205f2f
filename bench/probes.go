package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
)

// fetch GETs a URL, retrying until the server answers (a proxier just
// started may not listen yet).
func fetch(url string, timeout time.Duration) ([]byte, error) {
	c := http.Client{Timeout: timeout}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := c.Get(url)
		if err == nil {
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("%s: %s", url, resp.Status)
			}
			return io.ReadAll(resp.Body)
		}
		if time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cachesSyncedAt finds, in a proxier's log, when both its Service and
// EndpointSlice caches were synced: our "informer caches synced" line (JSON,
// or an older build's zap console line), or the
// later of kube-proxy's two "Caches are synced" lines. Times in the log are
// UTC wall clock of this machine, so they compare with start.
func cachesSyncedAt(logPath string, start time.Time) (time.Time, bool) {
	f, err := os.Open(logPath)
	if err != nil {
		return time.Time{}, false
	}
	defer f.Close()
	var at time.Time
	seen := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var t time.Time
		var err error
		switch {
		case strings.Contains(line, "informer caches synced") && strings.HasPrefix(line, "{"):
			// component-base's JSON (the bench runs ours with it):
			// {"ts":<ms since the epoch>,...}
			var f struct{ TS json.RawMessage }
			if json.Unmarshal([]byte(line), &f) != nil {
				continue
			}
			var ok bool
			if t, ok = logTime(f.TS); !ok {
				continue
			}
			seen = 2
		case strings.Contains(line, "informer caches synced"):
			// zap's console format, of builds before the klog formats:
			// 2026-11-23T10:59:20.691Z<TAB>info ...
			t, err = time.Parse("2006-01-02T15:04:05.000Z0700", strings.Fields(line)[0])
			seen = 2
		case strings.Contains(line, "Caches are synced") &&
			(strings.Contains(line, "service config") || strings.Contains(line, "endpoint slice config")):
			// klog: I1123 10:59:20.691234 ...
			f := strings.Fields(line)
			if len(f) < 2 || len(f[0]) != 5 {
				continue
			}
			t, err = time.Parse("0102 15:04:05.000000", f[0][1:]+" "+f[1])
			t = time.Date(start.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
			seen++
		default:
			continue
		}
		if err == nil && t.After(at) && !t.Before(start.Add(-time.Second)) {
			at = t
		}
	}
	return at, seen >= 2 && !at.IsZero()
}

// watchAddressRemovals reports every address removed from the dummy link
// until stop is closed.
func watchAddressRemovals(stop chan struct{}) []string {
	updates := make(chan netlink.AddrUpdate, 1024)
	if err := netlink.AddrSubscribe(updates, stop); err != nil {
		return []string{"cannot watch addresses: " + err.Error()}
	}
	link, err := netlink.LinkByName(dummyiface.DefaultLinkName)
	if err != nil {
		return []string{"no " + dummyiface.DefaultLinkName}
	}
	var removed []string
	for u := range updates {
		if !u.NewAddr && u.LinkIndex == link.Attrs().Index {
			removed = append(removed, "address "+u.LinkAddress.IP.String())
		}
	}
	return removed
}
