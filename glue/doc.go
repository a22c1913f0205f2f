// Package glue keeps the iptables (and ip6tables) chains of kube-proxy's
// IPVS mode: masquerading, the NodePort and load-balancer rules and the
// filters, rule for rule as upstream writes them. Per-Service matching is
// in the ipsets, so the chains change only when a set fills or empties
// (Input); a Service's change rarely runs iptables at all.
//
// The chains are one iptables-restore payload, not a table of kernel
// objects: iptables has no per-rule write but a whole-table restore. Only
// the node-blocking rules of load balancers are edited one by one
// (blocked.go), since each costs a name lookup per node address.
package glue
