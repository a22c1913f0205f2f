// Package iptables reads and writes the proxier's few iptables chains through
// iptables-save and iptables-restore --noflush: one restore writes our whole
// chains and inserts the missing jumps from the built-in chains, and leaves
// every other rule on the node alone. Each run has a deadline, past which it
// is killed with its children (Exec). Fake models both for unit tests.
package iptables
