// Package proxier turns Services and EndpointSlices into IPVS kernel state.
//
// Data flow: informer handlers feed the changeTracker, which remembers the
// latest objects and which Services changed. The sync runner calls syncOnce,
// which computes the desired state of only the changed Services with the pure
// function desiredState, hands it to the reconciler, and the reconciler
// applies the difference to the kernel through the narrow ipvs, ipset and
// dummyiface interfaces. A periodic full sync does the same for every Service
// after re-reading the kernel, which repairs drift.
//
// Only the reconciler talks to the kernel; nothing here talks to the apiserver
// except through the events recorder.
package proxier
