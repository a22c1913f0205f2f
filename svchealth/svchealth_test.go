package svchealth

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/desired"
)

// loopback4 serves IPv4 health checks on 127.0.0.1 alone, so that tests
// take no port on the machine's other addresses.
var loopback4 = [2]Listen{desired.IPv4: {Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}}}

// v4 is an IPv4 Service's health check with n local endpoints.
func v4(port uint16, n int) Service {
	return Service{Port: port, In: [2]bool{desired.IPv4: true}, LocalEndpoints: [2]int{desired.IPv4: n}}
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) uint16 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return uint16(l.Addr().(*net.TCPAddr).Port)
}

func get(t *testing.T, port uint16) (int, string, http.Header, error) {
	t.Helper()
	return getFrom(t, "127.0.0.1", port)
}

func getFrom(t *testing.T, host string, port uint16) (int, string, http.Header, error) {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(host, strconv.Itoa(int(port))) + "/healthz")
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header, nil
}

func TestServer(t *testing.T) {
	var healthy atomic.Bool
	healthy.Store(true)
	s := New(healthy.Load)
	defer s.Close()
	web := types.NamespacedName{Namespace: "ns", Name: "web"}
	p1 := freePort(t)

	if failed := s.Sync(map[types.NamespacedName]Service{web: v4(p1, 2)}, loopback4); len(failed) != 0 {
		t.Fatal(failed)
	}
	code, body, h, err := get(t, p1)
	if err != nil || code != 200 || !strings.Contains(body, `"localEndpoints": 2`) || !strings.Contains(body, `"name": "web"`) ||
		h.Get("X-Load-Balancing-Endpoint-Weight") != "2" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("with local endpoints: %d %q %v %v", code, body, h, err)
	}

	s.Sync(map[types.NamespacedName]Service{web: v4(p1, 0)}, loopback4)
	if code, body, _, err := get(t, p1); err != nil || code != 503 || !strings.Contains(body, `"localEndpoints": 0`) {
		t.Fatalf("without local endpoints: %d %q %v", code, body, err)
	}
	s.Sync(map[types.NamespacedName]Service{web: v4(p1, 1)}, loopback4)
	healthy.Store(false)
	if code, body, _, err := get(t, p1); err != nil || code != 503 || !strings.Contains(body, `"serviceProxyHealthy": false`) {
		t.Fatalf("proxier unhealthy: %d %q %v", code, body, err)
	}
	healthy.Store(true)

	// A port taken by someone else fails for that Service alone, and is
	// served once free.
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	p2 := freePort(t)
	squatter, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(int(p2)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[types.NamespacedName]Service{web: v4(p1, 1), other: v4(p2, 1)}
	if failed := s.Sync(want, loopback4); len(failed) != 1 || failed[other] == nil {
		t.Fatalf("failed %v, want the other Service's port alone", failed)
	}
	if code, _, _, err := get(t, p1); err != nil || code != 200 {
		t.Fatalf("web's check stopped for the other's failure: %d %v", code, err)
	}
	squatter.Close()
	if failed := s.Sync(want, loopback4); len(failed) != 0 {
		t.Fatal(failed)
	}
	if code, _, _, err := get(t, p2); err != nil || code != 200 {
		t.Fatalf("the other's check after its port freed: %d %v", code, err)
	}

	// Gone from the Services: the port is closed.
	s.Sync(map[types.NamespacedName]Service{other: v4(p2, 1)}, loopback4)
	if _, _, _, err := get(t, p1); err == nil {
		t.Fatal("a removed health check still answers")
	}
}

// TestServesEachFamilyWithItsOwnCount: a dual-stack Service's check
// answers over IPv4 with its IPv4 endpoints and over IPv6 with its IPv6
// ones, as upstream's proxier of each family does; an IPv4-only Service is
// not served over IPv6; and moved listen addresses are followed.
func TestServesEachFamilyWithItsOwnCount(t *testing.T) {
	needIPv6Loopback(t)
	s := New(func() bool { return true })
	defer s.Close()
	lo6 := netip.MustParseAddr("::1")
	on := [2]Listen{desired.IPv4: loopback4[desired.IPv4], desired.IPv6: {Addrs: []netip.Addr{lo6}}}
	dual, only4 := types.NamespacedName{Namespace: "ns", Name: "dual"}, types.NamespacedName{Namespace: "ns", Name: "only4"}
	pd, p4 := freePort(t), freePort(t)
	want := map[types.NamespacedName]Service{
		dual:  {Port: pd, In: [2]bool{true, true}, LocalEndpoints: [2]int{desired.IPv4: 2}},
		only4: v4(p4, 1),
	}
	if failed := s.Sync(want, on); len(failed) != 0 {
		t.Fatal(failed)
	}
	if code, body, _, err := getFrom(t, "127.0.0.1", pd); err != nil || code != 200 || !strings.Contains(body, `"localEndpoints": 2`) {
		t.Errorf("dual-stack Service over IPv4: %d %q %v; want 200 with its 2 IPv4 endpoints", code, body, err)
	}
	if code, body, _, err := getFrom(t, "::1", pd); err != nil || code != 503 || !strings.Contains(body, `"localEndpoints": 0`) {
		t.Errorf("dual-stack Service over IPv6: %d %q %v; want 503 with no IPv6 endpoint", code, body, err)
	}
	if code, _, _, err := getFrom(t, "::1", p4); err == nil {
		t.Errorf("an IPv4-only Service's check answered over IPv6 (%d)", code)
	}

	// The IPv4 checks move to another address of the node.
	on[desired.IPv4] = Listen{Addrs: []netip.Addr{netip.MustParseAddr("127.0.0.2")}}
	if failed := s.Sync(want, on); len(failed) != 0 {
		t.Fatal(failed)
	}
	if code, _, _, err := getFrom(t, "127.0.0.2", p4); err != nil || code != 200 {
		t.Errorf("after the move, on the new address: %d %v", code, err)
	}
	if _, _, _, err := getFrom(t, "127.0.0.1", p4); err == nil {
		t.Error("after the move, the old address still answers")
	}
}

// TestFamiliesAndAddressesStandAlone: an address that cannot be listened
// on (its port taken) fails alone; the Service's other family keeps
// serving, and the address is opened once it can be.
func TestFamiliesAndAddressesStandAlone(t *testing.T) {
	needIPv6Loopback(t)
	s := New(func() bool { return true })
	defer s.Close()
	on := [2]Listen{desired.IPv4: loopback4[desired.IPv4], desired.IPv6: {Addrs: []netip.Addr{netip.MustParseAddr("::1")}}}
	dual := types.NamespacedName{Namespace: "ns", Name: "dual"}
	port := freePort(t)
	squatter, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(int(port)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[types.NamespacedName]Service{dual: {Port: port, In: [2]bool{true, true}, LocalEndpoints: [2]int{1, 1}}}
	if failed := s.Sync(want, on); failed[dual] == nil {
		t.Fatal("a taken port was not reported")
	}
	if code, _, _, err := getFrom(t, "::1", port); err != nil || code != 200 {
		t.Errorf("IPv6 stopped for IPv4's taken port: %d %v", code, err)
	}
	squatter.Close()
	if failed := s.Sync(want, on); len(failed) != 0 {
		t.Fatal(failed)
	}
	if code, _, _, err := getFrom(t, "127.0.0.1", port); err != nil || code != 200 {
		t.Errorf("IPv4 once its port was free: %d %v", code, err)
	}
	// One more address: the first keeps answering.
	on[desired.IPv4].Addrs = append(on[desired.IPv4].Addrs, netip.MustParseAddr("127.0.0.3"))
	if failed := s.Sync(want, on); len(failed) != 0 {
		t.Fatal(failed)
	}
	for _, a := range []string{"127.0.0.1", "127.0.0.3", "::1"} {
		if code, _, _, err := getFrom(t, a, port); err != nil || code != 200 {
			t.Errorf("after an address was added, %s: %d %v", a, code, err)
		}
	}
}

// needIPv6Loopback skips a test on a machine without ::1.
func needIPv6Loopback(t *testing.T) {
	t.Helper()
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	l.Close()
}
