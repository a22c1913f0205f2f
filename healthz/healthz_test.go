package healthz

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"
)

func TestHealthFollowsQueuedChanges(t *testing.T) {
	now := time.Unix(1000, 0)
	s := New(60 * time.Second)
	s.now = func() time.Time { return now }
	code := func(path string) int {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}

	if code("/healthz") != 200 {
		t.Fatal("healthy before any change")
	}
	s.QueuedUpdate()
	now = now.Add(59 * time.Second)
	if code("/healthz") != 200 {
		t.Fatal("a change younger than the timeout is still healthy")
	}
	now = now.Add(2 * time.Second)
	if code("/healthz") != 503 || code("/livez") != 503 {
		t.Fatal("a change older than the timeout without a sync must be unhealthy")
	}
	s.Updated()
	if code("/healthz") != 200 {
		t.Fatal("a successful sync restores health")
	}
	// A later queued change does not reset the clock of an earlier one.
	s.QueuedUpdate()
	now = now.Add(40 * time.Second)
	s.QueuedUpdate()
	now = now.Add(30 * time.Second)
	if code("/healthz") != 503 {
		t.Fatal("the oldest pending change counts")
	}
	s.Updated()
	s.SetNodeEligible(false)
	if code("/healthz") != 503 || code("/livez") != 200 {
		t.Fatal("an ineligible node fails healthz but not livez")
	}
}

// Each answer is told to Served: which path, and its status.
func TestEachAnswerIsCounted(t *testing.T) {
	s := New(time.Minute)
	var got []string
	s.Served = func(livez bool, code int) { got = append(got, fmt.Sprint(livez, code)) }
	s.SetNodeEligible(false)
	for _, path := range []string{"/healthz", "/livez"} {
		s.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	if want := []string{"false 503", "true 200"}; !slices.Equal(got, want) {
		t.Errorf("counted %v, want %v", got, want)
	}
}
