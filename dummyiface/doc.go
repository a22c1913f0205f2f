// Package dummyiface owns the dummy link kube-ipvs0 and the service addresses
// bound to it. IPVS only sees packets addressed to the host, so every virtual
// server address is bound here as a /32 (/128); the link stays down, which
// keeps the node from answering ARP for them.
//
// It must not touch any other link.
package dummyiface
