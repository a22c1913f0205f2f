package ipvs

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestParseProcTable(t *testing.T) {
	in := `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port Forward Weight ActiveConn InActConn
TCP  0A600001:01BB rr
  -> 0A000264:192B      Masq    1      2          3
UDP  0A60010A:0035 rr
  -> 0A800001:0035      Masq    0      0          0
  -> 0A800002:0035      Masq    1      0          0
TCP  0A60010B:0050 rr persistent 10800
TCP  [fd00:0000:0000:0000:0000:0000:0000:0001]:0050 rr
  -> [fd00:0000:0000:0000:0000:0000:0000:0002]:0050      Masq    1      0          0
FWM  00000001 rr
  -> 0A800003:0050      Masq    1      0          0
`
	got, err := ParseProcTable(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	key := func(s string, p Protocol) Key {
		ap := netip.MustParseAddrPort(s)
		return Key{Address: ap.Addr(), Protocol: p, Port: ap.Port()}
	}
	rs := func(s string, w, active, inactive int32) RealServer {
		ap := netip.MustParseAddrPort(s)
		return RealServer{Address: ap.Addr(), Port: ap.Port(), Weight: w, ActiveConns: active, InactiveConns: inactive}
	}
	want := map[Key][]RealServer{
		key("10.96.0.1:443", TCP): {rs("10.0.2.100:6443", 1, 2, 3)},
		key("10.96.1.10:53", UDP): {rs("10.128.0.1:53", 0, 0, 0), rs("10.128.0.2:53", 1, 0, 0)},
		key("10.96.1.11:80", TCP): {},
		key("[fd00::1]:80", TCP):  {rs("[fd00::2]:80", 1, 0, 0)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed\n%v\nwant\n%v", got, want)
	}
}
