// Package reconciler keeps the kernel equal to the desired state of every
// Service: IPVS virtual and real servers, the addresses on kube-ipvs0 and
// the ipset entries. It remembers what it believes the kernel holds, so a
// change to one Service is written by comparing that Service's objects
// alone; a drift check reads the kernel in the background and corrects the
// belief, so the next write repairs drift.
//
// Each kind of object is a table (table.go): what Services want of each
// key, what the kernel is believed to hold, the dirty keys, and the status
// of keys whose write failed, retried alone with backoff (status.go). The
// caller records changes (Record), writes them (Sync), and takes what was
// done (Outcome) for metrics, logs and Events.
//
// Beside it, packages of their own: realset (a virtual server's real
// servers), owners (the Services that want each object), rsstatus (the
// failed real servers) and serviceview, which builds the operator's view
// (State) from what the reconciler lends it.
package reconciler
