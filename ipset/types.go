package ipset

import (
	"errors"
	"fmt"
	"hash/fnv"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/objects"
)

// The values the ipsets hold are package objects': desired state is made
// of them without importing kernel access.
type (
	Type          = objects.SetType
	Set           = objects.Set
	Entry         = objects.Entry
	EntryProtocol = objects.EntryProtocol
)

const (
	HashIP          = objects.HashIP
	HashIPPort      = objects.HashIPPort
	HashIPPortIP    = objects.HashIPPortIP
	HashIPPortNet   = objects.HashIPPortNet
	BitmapPort      = objects.BitmapPort
	DefaultHashSize = objects.DefaultHashSize
	DefaultMaxElem  = objects.DefaultMaxElem
	EntryTCP        = objects.EntryTCP
	EntryUDP        = objects.EntryUDP
	EntrySCTP       = objects.EntrySCTP
)

// ErrNoSet says the set named does not exist: a read or write of a set
// fails with it (errors.Is) when the set is missing, and with another
// error when the set could not be read.
var ErrNoSet = errors.New("no such set")

// Interface is the ipsets of one network namespace.
type Interface interface {
	// EnsureSet creates the set if it does not exist; an existing set is kept with its entries.
	EnsureSet(Set) error
	Entries(set string) ([]Entry, error)
	// Count says how many entries the set holds without listing them.
	Count(set string) (int, error)
	// Has tests for one entry without listing the set.
	Has(set string, e Entry) (bool, error)
	// AddEntries and DeleteEntries return one result per entry; adding a
	// present entry or deleting a missing one is not an error.
	AddEntries(set string, entries []Entry) []error
	DeleteEntries(set string, entries []Entry) []error
	// Capacity says how many entries the set can hold: its maxelem, or
	// every port for a bitmap:port set.
	Capacity(set string) (int, error)
	// Grow replaces set s by one of the same entries that can hold
	// maxElem, in one atomic swap: rules that match on s never see it
	// empty. Nothing may write to s meanwhile.
	Grow(s Set, maxElem uint32) error
}

// growName is the temporary set Grow fills before the swap: short, as set
// names are at most 31 bytes.
func growName(set string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(set))
	return fmt.Sprintf("KIP-GROW-%08x", h.Sum32())
}
