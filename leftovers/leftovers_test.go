package leftovers

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
)

// afterSwitch is iptables-save on a node that ran kube-proxy in iptables
// mode, after our first sync: our nat KUBE-SERVICES and KUBE-PROXY-FIREWALL
// are written, iptables mode's chains and jumps are still there.
const afterSwitch = `*mangle
:PREROUTING ACCEPT [0:0]
:KUBE-KUBELET-CANARY - [0:0]
:KUBE-PROXY-CANARY - [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SERVICES - [0:0]
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A INPUT -j KUBE-FIREWALL
-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.20/32 -p tcp -m comment --comment "ns/empty has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
-A KUBE-NODEPORTS -m comment --comment "ns/lb health check node port" -m tcp -p tcp --dport 30200 -j ACCEPT
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SEP-XYZ - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-ABC - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ
-A KUBE-SVC-ABC -j KUBE-SEP-XYZ
-A KUBE-SEP-XYZ -p tcp -m tcp -j DNAT --to-destination 10.244.0.5:8080
COMMIT
`

const removal = `*mangle
:KUBE-PROXY-CANARY - [0:0]
-X KUBE-PROXY-CANARY
COMMIT
*filter
-D INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-D INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-D INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-D FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-D OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SERVICES - [0:0]
-X KUBE-EXTERNAL-SERVICES
-X KUBE-NODEPORTS
-X KUBE-PROXY-CANARY
-X KUBE-SERVICES
COMMIT
*nat
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SEP-XYZ - [0:0]
:KUBE-SVC-ABC - [0:0]
-X KUBE-NODEPORTS
-X KUBE-PROXY-CANARY
-X KUBE-SEP-XYZ
-X KUBE-SVC-ABC
COMMIT
`

func TestIPTablesModeChainsAndTheirJumpsGo(t *testing.T) {
	payload, chains, err := iptablesPayload(afterSwitch)
	if err != nil {
		t.Fatal(err)
	}
	if string(payload) != removal {
		t.Errorf("payload:\n%s\nwant:\n%s", payload, removal)
	}
	if chains != 9 {
		t.Errorf("%d chains removed, want 9", chains)
	}
}

// ipvsOnly is iptables-save on a node that only ever ran IPVS mode.
const ipvsOnly = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
-A INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-A INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-SERVICES - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
COMMIT
`

func TestNothingToRemoveOnAnIPVSNode(t *testing.T) {
	payload, _, err := iptablesPayload(ipvsOnly)
	if err != nil || payload != nil {
		t.Errorf("on a node with IPVS mode's chains alone: payload %q, %v; want none", payload, err)
	}
}

func TestWaitsWhileOurChainStillJumpsToTheirs(t *testing.T) {
	before := strings.Replace(afterSwitch, "-A KUBE-SERVICES -m comment --comment \"Kubernetes service cluster ip",
		"-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-ABC\n-A KUBE-SERVICES -m comment --comment \"Kubernetes service cluster ip", 1)
	_, _, err := iptablesPayload(before)
	var notYet NotYet
	if !errors.As(err, &notYet) || notYet != (NotYet{"nat", "KUBE-SERVICES", "KUBE-SVC-ABC"}) {
		t.Errorf("error %v; want NotYet for nat KUBE-SERVICES jumping to KUBE-SVC-ABC", err)
	}
}

type fakeIPTables struct {
	saved    string
	restored []string
}

func (f *fakeIPTables) Save() ([]byte, error) { return []byte(f.saved), nil }
func (f *fakeIPTables) Restore(p []byte) error {
	f.restored = append(f.restored, string(p))
	return nil
}

type fakeNFTables map[string]bool // "family table" → there

func (f fakeNFTables) DeleteTable(family, name string) (bool, error) {
	there := f[family+" "+name]
	delete(f, family+" "+name)
	return there, nil
}

func TestRemoveBothModesLeftovers(t *testing.T) {
	v4, v6 := &fakeIPTables{saved: afterSwitch}, &fakeIPTables{saved: "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n"}
	nft := fakeNFTables{"ip kube-proxy": true, "ip6 kube-proxy": true, "ip other": true}
	if err := Remove(zap.NewNop(), []iptables.Interface{v4, v6}, nft); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(v4.restored, []string{removal}) || len(v6.restored) != 0 {
		t.Errorf("restored %q (IPv4), %q (IPv6); want the removal in IPv4 alone", v4.restored, v6.restored)
	}
	if len(nft) != 1 || !nft["ip other"] {
		t.Errorf("nftables tables left: %v; want only ip other", nft)
	}
}

func TestIPTablesModeSeenAndAnswering(t *testing.T) {
	answering := strings.Replace(afterSwitch, "-A KUBE-SVC-ABC", "-A KUBE-SERVICES -d 10.96.0.10/32 -j KUBE-SVC-ABC\n-A KUBE-SVC-ABC", 1)
	for _, c := range []struct {
		name          string
		saved         string
		left, answers bool
	}{
		{"after our first sync", afterSwitch, true, false},
		{"before it", answering, true, true},
		{"IPVS mode alone", ipvsOnly, false, false},
	} {
		if left, answers := IPTablesMode([]byte(c.saved)); left != c.left || answers != c.answers {
			t.Errorf("%s: left %v, answers %v; want %v, %v", c.name, left, answers, c.left, c.answers)
		}
	}
}

// A line that is not what iptables-save writes (a bare "-A ") is passed
// over, not a panic in the proxier's start-up.
func TestABareAppendLineIsPassedOver(t *testing.T) {
	payload, _, err := iptablesPayload("*nat\n:KUBE-SVC-ABC - [0:0]\n-A \n-A\nCOMMIT\n")
	if err != nil || !strings.Contains(string(payload), "-X KUBE-SVC-ABC") {
		t.Errorf("payload %q, %v; want KUBE-SVC-ABC removed and the bare lines passed over", payload, err)
	}
}
