// Package desired computes the kernel state one Service asks for: its IPVS
// virtual and real servers, the addresses bound to kube-ipvs0, and its
// ipset entries, with the problems of its input (what was skipped and
// why). Compute is a pure function of the Service, its EndpointSlices,
// the node (Node) and a small Config: no kernel, no apiserver, no clock,
// so it is tested and fuzzed directly. The set names and definitions are
// upstream kube-proxy's, part of the drop-in contract.
package desired
