// Package fakekernel is the unit tests' kernel: the fakes of the IPVS
// table, the dummy link and the ipsets together, set up as the proxier
// leaves a node (the link, the IPv4 sets), with the record of what was
// written.
package fakekernel

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// Kernel is the three fakes.
type Kernel struct {
	IPVS  *ipvs.Fake
	Links *dummyiface.Fake
	Sets  *ipset.Fake
}

// Bare returns an empty kernel, as on a node the proxier has not set up.
func Bare() Kernel {
	return Kernel{IPVS: ipvs.NewFake(), Links: dummyiface.NewFake(), Sets: ipset.NewFake()}
}

// New returns a kernel with kube-ipvs0 and upstream's IPv4 sets.
func New(t testing.TB) Kernel {
	k := Bare()
	_ = k.Links.EnsureLink()
	for _, s := range desired.IPv4Sets {
		if err := k.Sets.EnsureSet(s); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// Ops returns every kernel write since the last call, sorted.
func (k Kernel) Ops() []string {
	all := append(append(k.IPVS.TakeOps(), k.Links.TakeOps()...), k.Sets.TakeOps()...)
	slices.Sort(all)
	return all
}

// SetHook sets h on the three fakes (see oplog.Hook); nil removes it.
func (k Kernel) SetHook(h oplog.Hook) {
	k.IPVS.SetHook(h)
	k.Links.SetHook(h)
	k.Sets.SetHook(h)
}

// Lines is every table's dump, one object a line.
func (k Kernel) Lines() []string {
	var out []string
	for _, d := range []string{k.IPVS.Dump(), k.Links.Dump(), k.Sets.Dump()} {
		if d != "" {
			out = append(out, strings.Split(d, "\n")...)
		}
	}
	return out
}

// ExpectOps fails t unless the writes since the last call are want, in
// any order.
func ExpectOps(t testing.TB, k Kernel, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := k.Ops(); !slices.Equal(got, want) {
		t.Errorf("kernel ops:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Clock is a clock moved by hand, for retry delays.
type Clock struct{ t time.Time }

// NewClock starts at the current time.
func NewClock() *Clock { return &Clock{time.Now()} }

// Now is the clock's time.
func (c *Clock) Now() time.Time { return c.t }

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) { c.t = c.t.Add(d) }
