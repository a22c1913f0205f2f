package ipset

import (
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// typeReply is the kernel's answer to IPSET_CMD_TYPE, as ip_set_core.c
// builds it: the protocol, the type's name and family, then its highest
// and lowest revision.
func typeReply(t Type, fam, max, min uint8) []byte {
	b := []byte{unix.AF_INET, nl.NFNETLINK_V0, 0, 0}
	b = nlbatch.Attr(b, nl.IPSET_ATTR_PROTOCOL, nlbatch.U8(nl.IPSET_PROTOCOL))
	b = nlbatch.Attr(b, nl.IPSET_ATTR_TYPENAME, nlbatch.String(string(t)))
	b = nlbatch.Attr(b, nl.IPSET_ATTR_FAMILY, nlbatch.U8(fam))
	b = nlbatch.Attr(b, nl.IPSET_ATTR_REVISION, nlbatch.U8(max))
	return nlbatch.Attr(b, nl.IPSET_ATTR_REVISION_MIN, nlbatch.U8(min))
}

// A set is made at the highest revision both upstream's ipset(8) and the
// kernel know: Linux 5.10 (Debian bullseye's, read in the VM) knows
// hash:ip up to revision 4, hash:ip,port and hash:ip,port,ip up to 5 and
// hash:ip,port,net up to 7, and refused the revisions we used to pin
// ("invalid type"), so no Service was programmed there.
func TestSetsAreMadeAtARevisionTheKernelKnows(t *testing.T) {
	for _, c := range []struct {
		name     string
		typ      Type
		min, max uint8
		want     uint8
		refused  bool
	}{
		{"Linux 6.1", HashIPPortIP, 0, 6, 6, false},
		{"Linux 6.1", HashIP, 0, 5, 5, false},
		{"Linux 6.1", HashIPPort, 0, 6, 6, false},
		// 6.12 knows bitmask support (hash:ip 6, hash:ip,port 7), and ipset(8)
		// v7.17, which upstream runs, makes them there.
		{"Linux 6.12", HashIP, 0, 6, 6, false},
		{"Linux 6.12", HashIPPort, 0, 7, 7, false},
		{"Linux 5.10", HashIPPortIP, 0, 5, 5, false},
		{"Linux 5.10", HashIPPort, 0, 5, 5, false},
		{"Linux 5.10", HashIPPortNet, 0, 7, 7, false},
		{"Linux 5.10", HashIP, 0, 4, 4, false},
		{"a newer kernel", HashIPPortNet, 0, 9, 8, false},
		{"a kernel that dropped old revisions", HashIP, 7, 8, 0, true},
	} {
		k, ok := parseTypeReply(typeReply(c.typ, unix.AF_INET, c.max, c.min))
		if !ok {
			t.Fatalf("%s: the reply did not parse", c.name)
		}
		got, err := pickRevision(c.typ, k)
		if c.refused {
			if err == nil {
				t.Errorf("%s, %s: revision %d, want a refusal", c.name, c.typ, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s, %s (kernel %d–%d): revision %d, %v; want %d", c.name, c.typ, c.min, c.max, got, err, c.want)
		}
	}
}

// A reply without both revisions, or with them out of order, is not taken
// as an answer.
func TestTypeReplyWithoutRevisionsIsNoAnswer(t *testing.T) {
	short := []byte{unix.AF_INET, nl.NFNETLINK_V0, 0, 0}
	short = nlbatch.Attr(short, nl.IPSET_ATTR_REVISION, nlbatch.U8(6))
	for name, body := range map[string][]byte{
		"empty":         nil,
		"no lowest":     short,
		"min above max": typeReply(HashIP, unix.AF_INET, 3, 5),
	} {
		if k, ok := parseTypeReply(body); ok {
			t.Errorf("%s: parsed as %+v", name, k)
		}
	}
}
