// Package diff finds where the kernel differs from what the proxier wants,
// without changing the kernel. Its Kernel wraps the kernel tables: reads go
// to the kernel, writes are recorded as differences and answered as if
// done. A proxier run on it for one sync computes and adopts as it would on
// the node, and the writes it asks for are exactly the differences: the
// missing, extra and wrong objects.
package diff

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// Change says how the kernel differs on one object.
type Change string

const (
	Missing Change = "missing" // wanted, not in the kernel
	Extra   Change = "extra"   // in the kernel, not wanted
	Wrong   Change = "wrong"   // in the kernel, other than wanted
	// Draining: a real server in the kernel, no longer wanted, that carries
	// connections: it is to stay at weight 0 until they end (graceful
	// termination), then go.
	Draining Change = "draining"
)

// Kinds of objects, as rows name them.
const (
	KindVirtualServer = "virtual_server"
	KindRealServer    = "real_server"
	KindAddress       = "address"
	KindLink          = "link"
	KindSet           = "set"
	KindSetEntry      = "set_entry"
	KindChain         = "chain"
	KindRule          = "rule"
)

// Row is one object on which the kernel differs.
type Row struct {
	Kind   string `json:"kind"`
	Change Change `json:"change"`
	Object string `json:"object"`
	// Want and Have say what differs, for a wrong object.
	Want string `json:"want,omitempty"`
	Have string `json:"have,omitempty"`
}

// Rows collects rows from the kernel tables, which the proxier writes from
// several goroutines.
type Rows struct {
	mu   sync.Mutex
	rows []Row
	seen map[Row]bool
}

func (r *Rows) add(row Row) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[Row]bool{}
	}
	if !r.seen[row] { // a retried write is one difference
		r.seen[row] = true
		r.rows = append(r.rows, row)
	}
}

// Sorted returns the rows by kind, then object.
func (r *Rows) Sorted() []Row {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.rows)
	slices.SortFunc(out, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Object, b.Object), cmp.Compare(a.Change, b.Change))
	})
	return out
}

func (row Row) String() string {
	if row.Want != "" && row.Have != "" {
		return fmt.Sprintf("%s %s %s: want %s, have %s", row.Kind, row.Change, row.Object, row.Want, row.Have)
	}
	return fmt.Sprintf("%s %s %s", row.Kind, row.Change, row.Object)
}

// Recording wraps the kernel tables of k: reads go to them, writes become
// rows of the Result.
func Recording(k proxier.Kernel) (proxier.Kernel, *Result) {
	res := &Result{}
	out := proxier.Kernel{NodeAddrs: k.NodeAddrs,
		IPVS:  IPVS{Interface: k.IPVS, Rows: &res.rows},
		Links: &Links{Interface: k.Links, Rows: &res.rows},
		Sets:  &Sets{Interface: k.Sets, Rows: &res.rows},
	}
	res.chains = []*Chains{{Interface: k.IPTables, Rows: &res.rows, Family: "IPv4"}}
	out.IPTables = res.chains[0]
	if k.IP6Tables != nil {
		res.chains = append(res.chains, &Chains{Interface: k.IP6Tables, Rows: &res.rows, Family: "IPv6"})
		out.IP6Tables = res.chains[1]
	}
	return out, res
}

// Result is what a proxier asked of a Recording kernel.
type Result struct {
	rows   Rows
	chains []*Chains
}

// Rows returns the differences, sorted: the writes asked for, and the
// chains compared with the kernel's as they are now.
func (r *Result) Rows() ([]Row, error) {
	for _, c := range r.chains {
		if err := c.Compare(); err != nil {
			return nil, fmt.Errorf("read the %s chains: %w", c.Family, err)
		}
	}
	return r.rows.Sorted(), nil
}
