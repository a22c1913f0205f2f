// Package proxier turns Services and EndpointSlices into IPVS kernel state.
//
// Data flow: informer handlers feed the changeTracker, which remembers the
// latest objects and which Services changed. The runner calls syncOnce at a
// bounded rate. A sync computes the desired state of only the changed
// Services with the pure function desired.Compute and hands it to the
// reconciler, which writes the difference from what it believes the kernel
// holds through the narrow ipvs, ipset and dummyiface interfaces; glue keeps
// the iptables chains. A drift check, due once per sync period, reads the
// kernel (in the background), corrects the belief and so repairs drift at the
// next write.
//
// A kernel object the kernel refuses has a status of its own and is retried
// alone with backoff (status.go); it never fails the sync or the health
// check. Only the reconciler and glue talk to the kernel; nothing here talks
// to the apiserver except through the events recorder.
package proxier
