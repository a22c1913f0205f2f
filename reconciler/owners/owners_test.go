package owners

import (
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
)

func TestOwnersKeepAnObjectUntilItsLastOwner(t *testing.T) {
	o := Map[string, int]{}
	o.Add("vip", testobj.Name("b"), 2)
	o.Add("vip", testobj.Name("c"), 3)
	o.Add("vip", testobj.Name("b"), 20) // an owner's new value replaces its old one
	if v, ok := o.Get("vip"); !ok || v != 20 {
		t.Fatalf("two owners: got %d, %v; want b's latest value 20", v, ok)
	}
	for owner, want := range map[string]int{"b": 20, "c": 3} {
		if v, ok := o.Of("vip", testobj.Name(owner)); !ok || v != want {
			t.Fatalf("what %s wants: got %d, %v; want %d", owner, v, ok, want)
		}
	}
	if _, ok := o.Of("vip", testobj.Name("x")); ok {
		t.Fatal("x wants vip, which it never asked for")
	}
	o.Remove("vip", testobj.Name("b")) // the inline owner goes; another takes its place
	if v, ok := o.Get("vip"); !ok || v != 3 {
		t.Fatalf("after b left: got %d, %v; want c's value 3", v, ok)
	}
	o.Remove("vip", testobj.Name("x")) // not an owner: nothing changes
	o.Remove("vip", testobj.Name("c"))
	if _, ok := o.Get("vip"); ok || len(o) != 0 {
		t.Fatalf("after the last owner left the object is still wanted: %+v", o)
	}
}
