package ipset

import (
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// preferred is the highest revision of each type that ipset(8) v7.17 knows:
// upstream kube-proxy's image runs it, and it makes each set at the highest
// revision both it and the kernel know, as we do (revision), so that `ipset
// save` prints the same sets as upstream's. The kernel decides where it is
// older: 6.1 knows hash:ip up to 5 and hash:ip,port up to 6 (bitmask support
// came in 6.2), 5.10 hash:ip up to 4. Read off `ipset list -t` in the VM on
// each kernel, beside ipset(8)'s own sets (TestSetsMadeAtIPSetToolsRevisions).
var preferred = map[Type]uint8{
	HashIP:        6,
	HashIPPort:    7,
	HashIPPortIP:  6,
	HashIPPortNet: 8,
	BitmapPort:    3,
}

// kernelRevisions is the range of revisions the kernel knows of a set type
// in one family.
type kernelRevisions struct{ min, max uint8 }

// pickRevision chooses the revision to create a set at: ours where the
// kernel knows it, else the highest both sides know. Every revision up to
// ours takes what the proxier writes (a family, maxelem, entries); a kernel
// that knows none of them is refused with the reason.
func pickRevision(t Type, k kernelRevisions) (uint8, error) {
	want, ok := preferred[t]
	if !ok {
		return 0, fmt.Errorf("set type %s is not one the proxier creates", t)
	}
	rev := min(want, k.max)
	if rev < k.min {
		return 0, fmt.Errorf("the kernel knows revisions %d–%d of set type %s, this build %d and older", k.min, k.max, t, want)
	}
	return rev, nil
}

// revision is the revision to create a set of type t and family fam
// (unix.AF_INET or AF_INET6) at, from the kernel's answer, asked once per
// type and family: IPSET_CMD_TYPE, as ipset(8) asks before each create.
func (n *Netlink) revision(t Type, fam uint8) (uint8, error) {
	key := typeKey{t, fam}
	k, ok := n.revisions[key]
	if !ok {
		var err error
		if k, err = n.queryType(t, fam); err != nil {
			return 0, err
		}
		if n.revisions == nil {
			n.revisions = map[typeKey]kernelRevisions{}
		}
		n.revisions[key] = k
	}
	return pickRevision(t, k)
}

type typeKey struct {
	t   Type
	fam uint8
}

// queryType asks the kernel which revisions of type t it knows in family
// fam. The kernel loads the type's module if it must; a type it does not
// have at all fails with IPSET_ERR_FIND_TYPE.
func (n *Netlink) queryType(t Type, fam uint8) (kernelRevisions, error) {
	reply, err := n.w.Get(nlbatch.Request{Type: nl.IPSET_CMD_TYPE | unix.NFNL_SUBSYS_IPSET<<8, Data: typeRequest(t, fam)})
	if err != nil {
		return kernelRevisions{}, fmt.Errorf("ask the kernel for set type %s's revisions: %w", t, ipsetError(err))
	}
	k, ok := parseTypeReply(reply)
	if !ok {
		return kernelRevisions{}, fmt.Errorf("ask the kernel for set type %s's revisions: its answer has none", t)
	}
	return k, nil
}

func typeRequest(t Type, fam uint8) []byte {
	b := []byte{unix.AF_INET, nl.NFNETLINK_V0, 0, 0}
	b = nlbatch.Attr(b, nl.IPSET_ATTR_PROTOCOL, nlbatch.U8(nl.IPSET_PROTOCOL))
	b = nlbatch.Attr(b, nl.IPSET_ATTR_TYPENAME, nlbatch.String(string(t)))
	return nlbatch.Attr(b, nl.IPSET_ATTR_FAMILY, nlbatch.U8(fam))
}

// parseTypeReply reads the highest and lowest revision from the kernel's
// answer to IPSET_CMD_TYPE; ok says both were there and in order.
func parseTypeReply(body []byte) (k kernelRevisions, ok bool) {
	if len(body) < 4 {
		return k, false
	}
	var hasMin, hasMax bool
	nlbatch.Attrs(body[4:], func(typ uint16, v []byte) {
		if len(v) != 1 {
			return
		}
		switch typ {
		case nl.IPSET_ATTR_REVISION:
			k.max, hasMax = v[0], true
		case nl.IPSET_ATTR_REVISION_MIN:
			k.min, hasMin = v[0], true
		}
	})
	return k, hasMin && hasMax && k.min <= k.max
}
