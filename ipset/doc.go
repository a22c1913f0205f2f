// Package ipset owns the kernel ipsets the proxier's iptables rules match on.
// It speaks the ipset netlink protocol directly (no exec of the ipset binary)
// and models sets and entries as plain values; Fake keeps kernel semantics for
// unit tests.
//
// It creates and fills only the sets it is asked to; it never destroys a set,
// because iptables rules may still reference it.
package ipset
