package proxier

import (
	"strings"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/events"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/reconciler"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// What one sync tells the operator of its objects at most, in log lines and
// in Events: when the kernel refuses everything at once (a module gone), a
// line per object would flood the log and the apiserver.
const reportsMax = 50

// problemsMax bounds one Service's problems in a log line, in bytes.
const problemsMax = 2048

// report logs and posts an event for a Service's bad input, once per distinct
// set of problems, so a periodic sync does not repeat it.
func (p *Proxier) report(in serviceInput, problems []string) {
	// Problems quote what the object's author wrote, which can be a
	// 256 KiB annotation: the log keeps a bounded part (the Event's note
	// is bounded by the events package).
	msg := events.Truncate(strings.Join(problems, "; "), problemsMax)
	if p.problems[in.name] == msg {
		return
	}
	if msg == "" {
		delete(p.problems, in.name)
		return
	}
	p.problems[in.name] = msg
	p.log.Warn("skipping invalid parts of service", zap.Stringer("service", in.name), zap.String("problems", msg))
	if p.events != nil && in.service != nil {
		p.events.Eventf(in.service.Reference(), nil, v1.EventTypeWarning, "InvalidService", "Sync", "kube-ipvs-proxy skipped: %s", msg)
	}
}

// reportObjects tells of objects that failed for the first time (a Warning
// line, and a Warning Event on a Service that wants it) or recovered (an
// Info line), sets the failed-objects gauge, and returns how many objects
// are failed now, from the reconciler's outcome and the setup's status.
// Retries in between are silent.
func (p *Proxier) reportObjects(out reconciler.Outcome) int {
	reports := append(out.Reports, p.setup.status.TakeReports()...)
	evented := map[types.NamespacedName]bool{}
	for i, r := range reports {
		if i == reportsMax {
			p.log.Warn("more kernel objects changed status; see the failed objects gauge", zap.Int("unlisted", len(reports)-i))
			break
		}
		fields := []zap.Field{zap.String("kind", string(r.Kind)), zap.String("object", r.Object)}
		if r.Owner.Name != "" {
			fields = append(fields, zap.Stringer("service", r.Owner))
		}
		if r.Err == nil {
			p.log.Info("kernel object programmed after failing", append(fields, zap.Int("attempts", r.Attempts))...)
			continue
		}
		p.log.Warn("kernel refused an object; retrying it alone with backoff, the rest is programmed", append(fields, zap.Error(r.Err))...)
		if p.events == nil || r.Owner.Name == "" || evented[r.Owner] {
			continue
		}
		if svc := p.changeTracker.service(r.Owner); svc != nil {
			evented[r.Owner] = true
			// No node in the note: the same refusal on many nodes is one
			// Event (named by its content), each node its reporter.
			p.events.Eventf(svc.Reference(), nil, v1.EventTypeWarning, "KernelRefused", "Sync",
				"kube-ipvs-proxy could not program %s %s: %v; retrying", strings.ReplaceAll(string(r.Kind), "_", " "), r.Object, r.Err)
		}
	}
	total := 0
	counts := out.Failed
	counts[status.KindSetup] = p.setup.status.Count()
	for _, kind := range status.Kinds {
		p.metrics.FailedObjects.WithLabelValues(string(kind)).Set(float64(counts[kind]))
		total += counts[kind]
	}
	return total
}
