package kubeclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// apiserver answers every GET with list and records each request.
type apiserver struct {
	list any
	mu   sync.Mutex
	seen []string // method, path and query
	body []byte   // of the last POST
}

func (a *apiserver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen = append(a.seen, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPost {
		a.body, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(a.body)
		return
	}
	_ = json.NewEncoder(w).Encode(a.list)
}

func client(t *testing.T, a *apiserver) *Client {
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{ContentType: "application/json"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestListAsksForTheResourceWhereItLives(t *testing.T) {
	a := &apiserver{list: map[string]any{"apiVersion": "v1", "kind": "ServiceList",
		"items": []any{map[string]any{"metadata": map[string]any{"name": "web", "namespace": "tenant"},
			"spec": map[string]any{"clusterIP": "10.96.0.10"}}}}}
	c := client(t, a)
	selector := func(o *metav1.ListOptions) { o.LabelSelector = "a=b" }
	for _, tc := range []struct {
		r         Resource
		namespace string
		want      string
	}{
		{Services, "tenant", "GET /api/v1/namespaces/tenant/services?labelSelector=a%3Db"},
		{Services, "", "GET /api/v1/services?labelSelector=a%3Db"},
		{EndpointSlices, "", "GET /apis/discovery.k8s.io/v1/endpointslices?labelSelector=a%3Db"},
		{Nodes, "tenant", "GET /api/v1/nodes?labelSelector=a%3Db"}, // cluster-scoped
	} {
		a.seen = nil
		lw := c.ListWatch(tc.r, tc.namespace, selector).(cache.ListerWatcherWithContext)
		// The server answers a ServiceList whatever is asked: only the request matters here.
		_, _ = lw.ListWithContext(context.Background(), metav1.ListOptions{})
		if len(a.seen) != 1 || a.seen[0] != tc.want {
			t.Errorf("%s in %q: requests %q, want %q", tc.r.Name(), tc.namespace, a.seen, tc.want)
		}
	}
	out, err := c.ListWatch(Services, "", selector).(cache.ListerWatcherWithContext).ListWithContext(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, ok := out.(*v1.ServiceList)
	if !ok || len(list.Items) != 1 || list.Items[0].Name != "web" || list.Items[0].Spec.ClusterIP != "10.96.0.10" {
		t.Errorf("decoded %#v", out)
	}
}

func TestWatchAsksToWatch(t *testing.T) {
	a := &apiserver{list: map[string]any{}}
	c := client(t, a)
	w, err := c.ListWatch(EndpointSlices, "tenant", func(*metav1.ListOptions) {}).(cache.ListerWatcherWithContext).
		WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "7"})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	want := "GET /apis/discovery.k8s.io/v1/namespaces/tenant/endpointslices?resourceVersion=7&watch=true"
	if len(a.seen) != 1 || a.seen[0] != want {
		t.Errorf("requests %q, want %q", a.seen, want)
	}
}

func TestCreateEventPostsToItsNamespace(t *testing.T) {
	a := &apiserver{}
	c := client(t, a)
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "web.1", Namespace: "tenant"}, Reason: "InvalidService"}
	if err := c.CreateEvent(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	want := "POST /apis/events.k8s.io/v1/namespaces/tenant/events?"
	if len(a.seen) != 1 || a.seen[0] != want {
		t.Errorf("requests %q, want %q", a.seen, want)
	}
	var got eventsv1.Event
	if err := json.Unmarshal(a.body, &got); err != nil || got.Reason != "InvalidService" || got.Name != "web.1" || got.Kind != "Event" {
		t.Errorf("posted %s (%v)", a.body, err)
	}
}
