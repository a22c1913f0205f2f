package zpages

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, h http.Handler, accept string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", "/", nil)
	if accept != "" {
		r.Header.Set("Accept", accept)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// /flagz answers text (with upstream's header and warning, flags sorted)
// without an Accept header or for text/plain, the v1beta1 object as JSON
// for a client that asks for it, and 406 otherwise.
func TestFlagzNegotiatesAsUpstream(t *testing.T) {
	h := Flagz("kube-ipvs-proxy", map[string]string{"v": "2", "ipvs-scheduler": "rr"})
	for _, accept := range []string{"", "text/plain", "*/*", "application/yaml, text/plain;q=0.5"} {
		w := get(t, h, accept)
		want := "\nkube-ipvs-proxy flagz\n" + warning + "\nipvs-scheduler=rr\nv=2\n"
		if w.Code != 200 || w.Body.String() != want {
			t.Errorf("Accept %q: %d %q, want %q", accept, w.Code, w.Body.String(), want)
		}
	}
	w := get(t, h, "application/json;g=config.k8s.io;v=v1beta1;as=Flagz")
	var obj struct {
		Kind, APIVersion string
		Metadata         struct{ Name string }
		Flags            map[string]string
	}
	if err := json.Unmarshal(w.Body.Bytes(), &obj); err != nil || w.Code != 200 {
		t.Fatalf("JSON: %d %v: %s", w.Code, err, w.Body)
	}
	if obj.Kind != "Flagz" || obj.APIVersion != "config.k8s.io/v1beta1" || obj.Metadata.Name != "kube-ipvs-proxy" || obj.Flags["v"] != "2" {
		t.Errorf("JSON %+v", obj)
	}
	for _, accept := range []string{"application/json", "application/json;g=config.k8s.io;v=v1beta1;as=Statusz", "image/png"} {
		if w := get(t, h, accept); w.Code != http.StatusNotAcceptable {
			t.Errorf("Accept %q: %d, want 406", accept, w.Code)
		}
	}
}

func TestStatuszSaysWhenAndWhat(t *testing.T) {
	started := time.Now().Add(-90 * time.Second)
	h := Statusz("kube-ipvs-proxy", "v0.1.0", started, []string{"/metrics", "/configz", "/healthz"})
	body := get(t, h, "").Body.String()
	for _, want := range []string{"\nkube-ipvs-proxy statusz\n" + warning + "\n", "Started: " + started.Format(time.UnixDate) + "\n",
		"Up: 1m30s\n", "Binary version: v0.1.0\n", "Paths: /configz /healthz /metrics\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in\n%s", want, body)
		}
	}
	var obj struct {
		Kind          string
		UptimeSeconds int64
		Paths         []string
	}
	w := get(t, h, "application/json;g=config.k8s.io;v=v1beta1;as=Statusz")
	if err := json.Unmarshal(w.Body.Bytes(), &obj); err != nil || obj.Kind != "Statusz" || obj.UptimeSeconds < 90 || len(obj.Paths) != 3 {
		t.Errorf("JSON %+v, %v: %s", obj, err, w.Body)
	}
}
