// Package ipset owns the kernel ipsets the proxier's iptables rules match on.
// It speaks the ipset netlink protocol directly (no exec of the ipset binary)
// and models sets and entries as plain values; Fake keeps kernel semantics for
// unit tests.
//
// It creates and fills only the sets it is asked to. It destroys a set only
// when told to (--cleanup) and the temporary one a Grow swaps in: iptables
// rules may still reference any other, and the kernel refuses those (EBUSY).
package ipset
