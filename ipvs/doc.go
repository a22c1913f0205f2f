// Package ipvs owns the kernel's IPVS table: virtual servers and their real
// servers, as plain values. Netlink speaks the IPVS generic netlink protocol
// itself (writes batched, reads as dumps) behind a narrow Interface, so the
// proxier can be tested against Fake, which keeps kernel semantics
// (duplicates and missing objects are errors) and prints its state.
//
// It knows nothing about Kubernetes and never decides what should exist.
package ipvs
