package reconciler

import (
	"fmt"
	"math/bits"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
)

// An ipset holds at most its maxelem entries, fixed when it is created.
// Upstream creates every set with 65,536 and stops programming a set that
// fills (a cluster with more Service ports than that loses the rest). The
// reconciler grows a set before an add pass would overfill it, to twice
// what it will then hold, rounded up to a power of two: a growing cluster
// grows a set rarely, and a set below 65,536 stays as upstream makes it.

// ensureCapacity grows set, if needed, to take adding more entries to what
// it is believed to hold. It runs in the entries lane, which alone touches
// sets and capacity.
func (r *Reconciler) ensureCapacity(set string, more int) error {
	capacity, known := r.setUse.capacity[set]
	if !known {
		c, err := r.sets.Capacity(set)
		if err != nil {
			return err
		}
		capacity, r.setUse.capacity[set] = c, c
	}
	need := r.setUse.entries[set] + more
	if need <= capacity {
		return nil
	}
	def, ok := setDefinition(set)
	if !ok {
		return fmt.Errorf("ipset %s: unknown set, cannot grow it", set)
	}
	size := 1 << bits.Len(uint(2*need-1))
	if err := r.sets.Grow(def, uint32(size)); err != nil {
		return err
	}
	r.setUse.capacity[set] = size
	r.done.Grown = append(r.done.Grown, fmt.Sprintf("%s to %d", set, size))
	return nil
}

// setDefinition is the named set as the proxier creates it.
func setDefinition(name string) (ipset.Set, bool) {
	for _, s := range desired.AllSets() {
		if s.Name == name {
			return s, true
		}
	}
	return ipset.Set{}, false
}
