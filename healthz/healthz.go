// Package healthz reports whether the proxier keeps up with the changes it is
// given, with kube-proxy's semantics, and serves that on /healthz and /livez.
package healthz

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// State is healthy while no queued change has waited longer than the timeout
// without a successful sync. The zero value is not usable; use New.
type State struct {
	mu           sync.Mutex
	timeout      time.Duration
	lastUpdated  time.Time
	oldestQueued time.Time // zero when nothing is waiting
	nodeEligible bool
	now          func() time.Time
	// Served, if set, is told of each answer: /healthz or /livez and
	// its HTTP status (kube-proxy's healthz and livez counters).
	Served func(livez bool, code int)
}

func New(timeout time.Duration) *State {
	return &State{timeout: timeout, nodeEligible: true, now: time.Now}
}

// QueuedUpdate records that a change is waiting to be applied.
func (s *State) QueuedUpdate() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.oldestQueued.IsZero() {
		s.oldestQueued = s.now()
	}
}

// Updated records a successful sync: everything queued before it is applied.
func (s *State) Updated() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastUpdated = s.now()
	s.oldestQueued = time.Time{}
}

// SetNodeEligible records whether the node may receive load-balancer traffic
// (false while it is being deleted or drained by the autoscaler).
func (s *State) SetNodeEligible(ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nodeEligible = ok
}

type report struct {
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible,omitempty"`
}

// Healthy reports the sync health and the body to serve.
func (s *State) Healthy() (bool, report) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	ok := s.oldestQueued.IsZero() || now.Sub(s.oldestQueued) < s.timeout
	return ok, report{LastUpdated: s.lastUpdated, CurrentTime: now}
}

func (s *State) serve(w http.ResponseWriter, withNode bool) {
	ok, rep := s.Healthy()
	if withNode {
		s.mu.Lock()
		eligible := s.nodeEligible
		s.mu.Unlock()
		rep.NodeEligible = &eligible
		ok = ok && eligible
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	code := http.StatusOK
	if !ok {
		code = http.StatusServiceUnavailable
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(rep)
	if s.Served != nil {
		s.Served(!withNode, code)
	}
}

// Handler serves /healthz (sync health and node eligibility) and /livez (sync health only).
func (s *State) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { s.serve(w, true) })
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { s.serve(w, false) })
	return mux
}
