package diff_test

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/diff"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/glue"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/fakekernel"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/oplog"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/testobj"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

type noEvents struct{}

func (noEvents) Eventf(_, _ runtime.Object, _, _, _, _ string, _ ...any) {}

// syncOnce runs one first sync of a new proxier on k, for a NodePort
// Service with two endpoints.
func syncOnce(t *testing.T, k proxier.Kernel) { syncWith(t, k, "10.0.0.1", "10.0.0.2") }

// syncWith is syncOnce with the endpoints ips.
func syncWith(t *testing.T, k proxier.Kernel, ips ...string) {
	t.Helper()
	var eps []testobj.EP
	for _, ip := range ips {
		eps = append(eps, testobj.EP{IP: ip, Ready: testobj.Yes})
	}
	p := proxier.New(proxier.Config{Desired: desired.Config{NodeName: "me"}, Glue: glue.Config{MasqueradeBit: 14}, SyncPeriod: time.Hour,
		ServeNoHealthChecks: true}, k, zap.NewNop(), healthz.New(time.Minute), metrics.New(), noEvents{})
	svc := testobj.Service("10.96.0.10", testobj.Port("", v1.ProtocolTCP, 80))
	p.OnServiceAdd(desired.ServiceOf(svc))
	p.OnEndpointSliceAdd(desired.SliceOf(testobj.Slice("s-1", []discovery.EndpointPort{testobj.SlicePort("", v1.ProtocolTCP, 8080)}, eps...)))
	p.OnServicesSynced()
	p.OnEndpointSlicesSynced()
	p.SyncNow()
}

func TestDiffShowsDriftAndWritesNothing(t *testing.T) {
	k := fakekernel.Bare()
	ipt := &iptables.Fake{}
	kernel := proxier.Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: ipt}

	// On a bare node everything is missing, and nothing is written.
	rec, res := diff.Recording(kernel)
	syncOnce(t, rec)
	rows := mustRows(t, res)
	if got := k.Ops(); len(got) != 0 || len(ipt.Payloads) != 0 {
		t.Fatalf("diff wrote to the kernel: %v, %d payloads", got, len(ipt.Payloads))
	}
	for _, want := range []string{
		"link missing kube-ipvs0", "virtual_server missing 10.96.0.10:80/TCP", "real_server missing 10.96.0.10:80/TCP 10.0.0.1:8080",
		"address missing 10.96.0.10", "set missing KUBE-CLUSTER-IP", "set_entry missing KUBE-CLUSTER-IP 10.96.0.10,tcp:80",
		"chain missing IPv4 nat/KUBE-SERVICES",
	} {
		if !hasRow(rows, want) {
			t.Errorf("no row %q in:\n%s", want, strings.Join(rowLines(rows), "\n"))
		}
	}

	// Programmed, the node has no difference.
	syncOnce(t, kernel)
	k.Ops()
	if rows := mustRows(t, recordOnce(t, kernel)); len(rows) != 0 {
		t.Fatalf("a programmed node differs:\n%s", strings.Join(rowLines(rows), "\n"))
	}

	// Drift behind the proxier's back shows, row by row, and stays.
	key := ipvs.Key{Address: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: ipvs.TCP}
	vs := ipvs.VirtualServer{Key: key, Scheduler: "rr"}
	k.IPVS.Write([]ipvs.Op{
		{Kind: ipvs.DeleteRS, VS: vs, RS: ipvs.RealServer{Address: netip.MustParseAddr("10.0.0.2"), Port: 8080, Weight: 1}},
		{Kind: ipvs.UpdateVS, VS: ipvs.VirtualServer{Key: key, Scheduler: "wrr"}},
	})
	k.Links.AddAddresses([]netip.Addr{netip.MustParseAddr("10.96.9.9")})
	k.Sets.DeleteEntries(desired.SetClusterIP, []ipset.Entry{{IP: key.Address, Protocol: ipset.EntryTCP, Port: 80}})
	_ = ipt.Restore([]byte("*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n"))
	k.Ops()
	before := k.Lines()
	rows = mustRows(t, recordOnce(t, kernel))
	want := []string{
		"address extra 10.96.9.9",
		"chain wrong IPv4 nat/KUBE-SERVICES",
		"real_server missing 10.96.0.10:80/TCP 10.0.0.2:8080",
		"rule missing IPv4 nat/KUBE-SERVICES -m comment --comment \"Kubernetes service cluster ip + port for masquerade purpose\"",
		"set_entry missing KUBE-CLUSTER-IP 10.96.0.10,tcp:80",
		"virtual_server wrong 10.96.0.10:80/TCP",
	}
	for _, w := range want {
		if !hasRow(rows, w) {
			t.Errorf("no row %q in:\n%s", w, strings.Join(rowLines(rows), "\n"))
		}
	}
	if got := k.Ops(); len(got) != 0 || !slices.Equal(k.Lines(), before) {
		t.Fatalf("diff wrote to the kernel: %v", got)
	}
}

func recordOnce(t *testing.T, k proxier.Kernel) *diff.Result {
	rec, res := diff.Recording(k)
	syncOnce(t, rec)
	return res
}

func mustRows(t *testing.T, res *diff.Result) []diff.Row {
	t.Helper()
	rows, err := res.Rows()
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func rowLines(rows []diff.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.String())
	}
	return out
}

// hasRow says whether a row starts with want.
func hasRow(rows []diff.Row, want string) bool {
	for _, l := range rowLines(rows) {
		if strings.HasPrefix(l, want) {
			return true
		}
	}
	return false
}

// A set the kernel lacks is a missing row; a set it could not read fails
// the setup (and the diff, exit 2) rather than showing as missing.
func TestASetThatCannotBeReadIsNotMissing(t *testing.T) {
	k := fakekernel.Bare()
	set := ipset.Set{Name: desired.SetClusterIP, Type: ipset.HashIPPort}
	rows := &diff.Rows{}
	sets := &diff.Sets{Interface: k.Sets, Rows: rows}
	if err := sets.EnsureSet(set); err != nil {
		t.Fatal(err)
	}
	if got := rowLines(rows.Sorted()); !slices.Equal(got, []string{"set missing KUBE-CLUSTER-IP"}) {
		t.Fatalf("a set the kernel lacks: rows %q", got)
	}

	_ = k.Sets.EnsureSet(set)
	k.Sets.SetHook(oplog.FailWith(errors.New("netlink receive: interrupted"), "count "))
	rows = &diff.Rows{}
	sets = &diff.Sets{Interface: k.Sets, Rows: rows}
	if err := sets.EnsureSet(set); err == nil || len(rows.Sorted()) != 0 {
		t.Fatalf("a set that could not be read: error %v, rows %q; want the error and no row", err, rowLines(rows.Sorted()))
	}
}

// A removed backend that carries connections is to drain, not to go: the
// row says so. Once it is at weight 0 there is no row; once its
// connections end, it is extra.
func TestARemovedBackendWithConnectionsIsDraining(t *testing.T) {
	k := fakekernel.Bare()
	kernel := proxier.Kernel{IPVS: k.IPVS, Links: k.Links, Sets: k.Sets, IPTables: &iptables.Fake{}}
	syncOnce(t, kernel)
	key := ipvs.Key{Address: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: ipvs.TCP}
	gone := netip.MustParseAddrPort("10.0.0.2:8080")
	k.IPVS.SetConnections(key, gone, 1, 0)

	record := func() []string {
		rec, res := diff.Recording(kernel)
		syncWith(t, rec, "10.0.0.1")
		return rowLines(mustRows(t, res))
	}
	want := "real_server draining 10.96.0.10:80/TCP 10.0.0.2:8080: want weight 0 until its connections end, have weight 1"
	if got := record(); !slices.Equal(got, []string{want}) {
		t.Fatalf("a removed backend with a connection: rows %q, want %q", got, want)
	}
	syncWith(t, kernel, "10.0.0.1") // the running proxier starts the drain
	if got := record(); len(got) != 0 {
		t.Fatalf("a draining backend: rows %q, want none", got)
	}
	k.IPVS.SetConnections(key, gone, 0, 0)
	want = "real_server extra 10.96.0.10:80/TCP 10.0.0.2:8080"
	if got := record(); !slices.Equal(got, []string{want}) {
		t.Fatalf("a drained backend: rows %q, want %q", got, want)
	}
}
