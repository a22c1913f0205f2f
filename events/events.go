// Package events posts the proxier's Warning Events about Services so that
// a cluster-wide restart does not become an Event storm: the same warning
// about the same object gets the same Event name on every node and in every
// process, so the apiserver keeps one object however many proxiers report
// it; posting is asynchronous, rate-limited and bounded, so a sync never
// waits on the apiserver and a bad cluster cannot make a node flood it.
package events

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/reference"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/kubeclient"
)

// Sink creates Events in the apiserver: kubeclient.Client.
type Sink interface {
	CreateEvent(context.Context, *eventsv1.Event) error
}

// NoteMax is the longest note events.k8s.io/v1 accepts, in bytes.
const NoteMax = 1024

// Limits: a burst covers a node start that finds a few dozen bad Services,
// then one Event every 5 s; what does not fit in the queue is dropped and
// counted (the log line and the gauges still tell). One object gets one
// Event per reason per perObject at most, so a tenant who keeps changing
// what is wrong with a Service can neither crowd out others' Events nor
// make every node post one per edit; the last warning held back is posted
// when its wait is over (within flushEvery), since the proxier tells each
// warning once.
const (
	queueLen   = 200
	burst      = 25
	qps        = 0.2
	perObject  = 5 * time.Minute
	flushEvery = 5 * time.Second
	pendingMax = 4096
)

// Poster posts Events through events.k8s.io/v1 under names derived from
// what they say (see Name). Create it with New and run Run.
type Poster struct {
	sink                 Sink
	controller, instance string
	log                  *zap.Logger
	queue                chan *eventsv1.Event
	limiter              flowcontrol.RateLimiter
	dropped              atomic.Int64
	now                  func() time.Time

	mu sync.Mutex
	// last is when each object (by UID, or kind/namespace/name) and
	// reason last had an Event queued; pending is the last Event held
	// back for each, to queue when its wait is over.
	last    map[string]time.Time
	pending map[string]*eventsv1.Event
}

// New posts as controller (kube-proxy's "kube-proxy"), from instance (the
// node's name).
func New(sink Sink, controller, instance string, log *zap.Logger) *Poster {
	return &Poster{sink: sink, controller: controller, instance: instance, log: log,
		queue: make(chan *eventsv1.Event, queueLen), limiter: flowcontrol.NewTokenBucketRateLimiter(qps, burst), now: time.Now,
		last: map[string]time.Time{}, pending: map[string]*eventsv1.Event{}}
}

// Eventf queues an Event about regarding; it never blocks. An object gets
// one such Event per perObject, named by what it says (see Name).
func (p *Poster) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	p.queueEvent(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...), true)
}

// Announce queues a one-off Event, such as the proxier's start: it has a
// name of its own and no per-object wait, but shares the rate limit.
func (p *Poster) Announce(regarding runtime.Object, eventtype, reason, action, note string) {
	p.queueEvent(regarding, nil, eventtype, reason, action, note, false)
}

func (p *Poster) queueEvent(regarding, related runtime.Object, eventtype, reason, action, note string, byContent bool) {
	ref, err := reference.GetReference(kubeclient.Scheme, regarding)
	if err != nil {
		p.log.Warn("no Event: cannot refer to the object", zap.Error(err))
		return
	}
	msg := Truncate(note, NoteMax)
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // where events about cluster-scoped objects go
	}
	now := p.now()
	id := string(ref.UID)
	if !byContent { // a name of its own: the time makes it unique
		id += "@" + now.Format(time.RFC3339Nano)
	}
	name := Name(ref.Name, id, eventtype, reason, msg)
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: name, Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: p.controller,
		ReportingInstance:   p.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Note:                msg,
		Type:                eventtype,
	}
	if related != nil {
		if r, err := reference.GetReference(kubeclient.Scheme, related); err == nil {
			ev.Related = r
		}
	}
	if byContent && !p.due(waitKey(ref, reason), ev) {
		return
	}
	p.enqueue(ev)
}

func (p *Poster) enqueue(ev *eventsv1.Event) {
	select {
	case p.queue <- ev:
	default:
		p.dropped.Add(1)
	}
}

// waitKey names an object (by UID, or kind/namespace/name) and a reason.
func waitKey(ref *v1.ObjectReference, reason string) string {
	key := string(ref.UID)
	if key == "" {
		key = ref.Kind + "/" + ref.Namespace + "/" + ref.Name
	}
	return key + "/" + reason
}

// due says whether key may have an Event now, and if so notes that it has;
// if not, ev is held back (replacing one held before) until flushDue.
func (p *Poster) due(key string, ev *eventsv1.Event) bool {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, ok := p.last[key]; ok && now.Sub(t) < perObject {
		if _, held := p.pending[key]; held || len(p.pending) < pendingMax {
			p.pending[key] = ev
		} else {
			p.dropped.Add(1)
		}
		return false
	}
	if len(p.last) >= 4096 { // forget the objects whose wait is over
		maps.DeleteFunc(p.last, func(k string, t time.Time) bool { return now.Sub(t) >= perObject && p.pending[k] == nil })
	}
	p.last[key] = now
	delete(p.pending, key) // ev is newer
	return true
}

// flushDue queues the held-back Events whose wait is over.
func (p *Poster) flushDue() {
	now := p.now()
	var due []*eventsv1.Event
	p.mu.Lock()
	for key, ev := range p.pending {
		if now.Sub(p.last[key]) >= perObject {
			p.last[key] = now
			delete(p.pending, key)
			due = append(due, ev)
		}
	}
	p.mu.Unlock()
	for _, ev := range due {
		p.enqueue(ev)
	}
}

// Run posts queued Events, and queues held-back ones as their wait ends,
// until ctx is done.
func (p *Poster) Run(ctx context.Context) {
	flush := time.NewTicker(flushEvery)
	defer flush.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-flush.C:
			p.flushDue()
		case ev := <-p.queue:
			if err := p.limiter.Wait(ctx); err != nil {
				return
			}
			p.post(ctx, ev)
		}
	}
}

func (p *Poster) post(ctx context.Context, ev *eventsv1.Event) {
	if n := p.dropped.Swap(0); n > 0 {
		p.log.Warn("Events dropped: more than the rate limit allows; the log has each warning", zap.Int64("dropped", n))
	}
	err := p.sink.CreateEvent(ctx, ev)
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		// Posted, by this proxier or another: one object either way.
	case ctx.Err() != nil:
	default:
		p.log.Warn("could not post an Event", zap.String("reason", ev.Reason),
			zap.String("regarding", ev.Regarding.Namespace+"/"+ev.Regarding.Name), zap.Error(err))
	}
}

// Name is an Event's name derived from its object and what it says: equal
// warnings share one name, so a second Create of one is refused as existing.
// It stays a valid object name however long the object's name is.
func Name(object, uid, eventtype, reason, note string) string {
	h := fnv.New64a()
	for _, s := range []string{object, uid, eventtype, reason, note} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	const maxName = 253 - 1 - 16
	if len(object) > maxName {
		object = object[:maxName]
	}
	return fmt.Sprintf("%s.%016x", object, h.Sum64())
}

// Truncate shortens s to at most max bytes, cut at a character boundary and
// marked with "...", for values an API object's author chose.
func Truncate(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "..."
	cut := max - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
