package events

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeclient/clientset"
)

func service(name, uid string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: name, UID: k8stypes.UID("uid-" + uid)}}
}

// drain posts everything queued.
func drain(t *testing.T, p *Poster) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	for deadline := time.Now().Add(5 * time.Second); len(p.queue) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("queue not drained")
		}
	}
	time.Sleep(20 * time.Millisecond) // the last Create
	cancel()
	<-done
}

// A rolling restart: every node, and every new process on a node, warns
// about the same bad Service. The apiserver keeps one Event per warning.
func TestTheSameWarningFromManyNodesIsOneEvent(t *testing.T) {
	client := fake.NewClientset()
	bad := service("bad", "1")
	other := service("other", "2")
	for _, node := range []string{"node-a", "node-b", "node-a", "node-c"} {
		p := New(clientset.Client{Interface: client}, "kube-proxy", node, zap.NewNop())
		p.Eventf(bad, nil, v1.EventTypeWarning, "InvalidService", "Sync", "kube-ipvs-proxy skipped: %s", "external IP \"x\" is not an IP address; skipped")
		p.Eventf(other, nil, v1.EventTypeWarning, "InvalidService", "Sync", "kube-ipvs-proxy skipped: %s", "something else")
		drain(t, p)
	}
	list, err := client.EventsV1().Events("tenant").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("%d Events, want one per bad Service", len(list.Items))
	}
	for _, ev := range list.Items {
		if ev.Regarding.Kind != "Service" || ev.Regarding.Namespace != "tenant" || ev.ReportingController != "kube-proxy" || ev.Type != v1.EventTypeWarning {
			t.Errorf("Event %+v", ev)
		}
	}
}

// events.k8s.io/v1 refuses a note over 1 KiB: a hostile annotation, or a
// Service with many bad addresses, would lose its Event altogether.
func TestLongNotesAreCutToWhatTheAPIAccepts(t *testing.T) {
	client := fake.NewClientset()
	p := New(clientset.Client{Interface: client}, "kube-proxy", "node-a", zap.NewNop())
	p.Eventf(service("long", "3"), nil, v1.EventTypeWarning, "InvalidService", "Sync", "%s", strings.Repeat("é", 100_000))
	drain(t, p)
	list, _ := client.EventsV1().Events("tenant").List(context.Background(), metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Fatalf("%d Events", len(list.Items))
	}
	note := list.Items[0].Note
	if len(note) > NoteMax || !utf8.ValidString(note) || !strings.HasSuffix(note, "...") {
		t.Fatalf("note of %d bytes, valid UTF-8 %v", len(note), utf8.ValidString(note))
	}
}

// Posting never blocks the sync: a queue that is full drops.
func TestEventfNeverBlocks(t *testing.T) {
	p := New(clientset.Client{Interface: fake.NewClientset()}, "kube-proxy", "node-a", zap.NewNop())
	for i := range queueLen + 10 {
		p.Eventf(service(fmt.Sprint("s", i), fmt.Sprint(i)), nil, v1.EventTypeWarning, "InvalidService", "Sync", "%d", i)
	}
	if got := p.dropped.Load(); got != 10 {
		t.Fatalf("dropped %d, want 10", got)
	}
}

func TestNameIsAValidObjectName(t *testing.T) {
	n := Name(strings.Repeat("a", 300), "u", "Warning", "R", "note")
	if len(n) > 253 {
		t.Fatalf("name of %d bytes", len(n))
	}
	if Name("s", "u", "Warning", "R", "one") == Name("s", "u", "Warning", "R", "two") {
		t.Fatal("different notes share a name")
	}
}

// A tenant who keeps changing what is wrong with one Service gets one
// Event per object every few minutes, and cannot crowd out another's.
func TestOneObjectOneEventPerWait(t *testing.T) {
	p := New(clientset.Client{Interface: fake.NewClientset()}, "kube-proxy", "node-a", zap.NewNop())
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	noisy, other := service("noisy", "5"), service("other", "6")
	for i := range 50 {
		p.Eventf(noisy, nil, v1.EventTypeWarning, "InvalidService", "Sync", "edit %d", i)
	}
	p.Eventf(other, nil, v1.EventTypeWarning, "InvalidService", "Sync", "bad")
	if n := len(p.queue); n != 2 {
		t.Fatalf("%d Events queued, want one for each object", n)
	}
	now = now.Add(perObject)
	p.Eventf(noisy, nil, v1.EventTypeWarning, "InvalidService", "Sync", "edit 50")
	if n := len(p.queue); n != 3 {
		t.Fatalf("%d Events queued once the wait was over, want 3", n)
	}
}

// Each reason has its own wait: a Service's conflict is told even if it
// had another warning minutes before (the conflict is reported once).
func TestEachReasonHasItsOwnWait(t *testing.T) {
	p := New(clientset.Client{Interface: fake.NewClientset()}, "kube-proxy", "node-a", zap.NewNop())
	svc := service("web", "7")
	p.Eventf(svc, nil, v1.EventTypeWarning, "InvalidService", "Sync", "bad port")
	p.Eventf(svc, nil, v1.EventTypeWarning, "ServiceConflict", "Sync", "takes another's address")
	p.Eventf(svc, nil, v1.EventTypeWarning, "InvalidService", "Sync", "bad port again")
	if n := len(p.queue); n != 2 {
		t.Fatalf("%d Events queued, want one for each reason", n)
	}
}

// A warning held back by its wait is posted when the wait is over, the
// last one only: the proxier tells each warning once (a conflict found
// minutes after another warning about the Service must not be lost).
func TestAHeldBackWarningIsPostedWhenItsWaitEnds(t *testing.T) {
	p := New(clientset.Client{Interface: fake.NewClientset()}, "kube-proxy", "node-a", zap.NewNop())
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	svc := service("web", "8")
	p.Eventf(svc, nil, v1.EventTypeWarning, "InvalidService", "Sync", "first")
	now = now.Add(time.Minute)
	p.Eventf(svc, nil, v1.EventTypeWarning, "InvalidService", "Sync", "second")
	p.Eventf(svc, nil, v1.EventTypeWarning, "InvalidService", "Sync", "conflict")
	p.flushDue()
	if n := len(p.queue); n != 1 {
		t.Fatalf("%d Events queued within the wait, want 1", n)
	}
	now = now.Add(perObject)
	p.flushDue()
	if n := len(p.queue); n != 2 {
		t.Fatalf("%d Events queued after the wait, want 2", n)
	}
	<-p.queue
	if ev := <-p.queue; ev.Note != "conflict" {
		t.Errorf("posted %q after the wait, want the last held back, \"conflict\"", ev.Note)
	}
	p.flushDue()
	if n := len(p.queue); n != 0 {
		t.Errorf("%d more Events queued, want none", n)
	}
}

// A proxier's start and its configuration warnings are one Event each
// time, even about the same Node within the per-object wait.
func TestAnnouncementsAreEachAnEvent(t *testing.T) {
	client := fake.NewClientset()
	p := New(clientset.Client{Interface: client}, "kube-proxy", "node-a", zap.NewNop())
	now := time.Unix(1000, 0)
	p.now = func() time.Time { now = now.Add(time.Second); return now }
	node := &v1.ObjectReference{Kind: "Node", Name: "node-a"}
	p.Announce(node, v1.EventTypeNormal, "Starting", "StartKubeProxy", "Starting kube-ipvs-proxy.")
	p.Announce(node, v1.EventTypeWarning, "UnknownConfigFields", "LoadConfig", "unknown: x")
	p.Announce(node, v1.EventTypeNormal, "Starting", "StartKubeProxy", "Starting kube-ipvs-proxy.")
	drain(t, p)
	list, err := client.EventsV1().Events(metav1.NamespaceDefault).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("%d Events, want 3", len(list.Items))
	}
	for _, ev := range list.Items {
		if ev.Regarding.Kind != "Node" || ev.Regarding.Name != "node-a" || !strings.HasPrefix(ev.Name, "node-a.") {
			t.Errorf("Event %+v", ev)
		}
	}
}
