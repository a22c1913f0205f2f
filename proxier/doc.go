// Package proxier runs the sync loop: it turns Services and EndpointSlices
// into kernel state through packages desired and reconciler.
//
// Data flow: informer handlers feed the changeTracker, which remembers the
// latest objects and which Services changed. The runner calls syncOnce at a
// bounded rate. A sync computes the desired state of only the changed
// Services (desired.Compute), settles which Service gets a virtual server
// two want (claims), and hands the result to the reconciler, which writes
// the difference from what it believes the kernel holds; glue keeps the
// iptables chains. A drift check, due once per sync period, reads the
// kernel in the background, corrects the belief and so repairs drift at the
// next write. The sync then serves health, metrics and Events from the
// reconciler's outcome.
//
// A kernel object the kernel refuses is retried alone with backoff (see
// status.Table); it never fails the sync or the health check.
// Nothing here talks to the apiserver except through the events recorder.
package proxier
