// Package iptables writes the proxier's few iptables chains. Whole chains are
// written atomically with iptables-restore --noflush, which replaces only the
// chains named in the input and leaves every other rule on the node alone;
// jumps from the built-in chains are ensured one rule at a time.
package iptables
