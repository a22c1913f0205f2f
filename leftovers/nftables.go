package leftovers

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Netlink deletes nftables tables over netlink: one table is one message,
// which does not justify an nftables library, nor the nft binary in the
// image.
type Netlink struct{}

var _ NFTables = Netlink{}

// families are the nftables families a table can be deleted from.
var families = map[string]uint8{"ip": unix.NFPROTO_IPV4, "ip6": unix.NFPROTO_IPV6}

// DeleteTable sends the deletion in a batch of its own (nftables takes
// changes only in batches) and waits for its acknowledgement.
func (Netlink) DeleteTable(family, name string) (bool, error) {
	fam, ok := families[family]
	if !ok {
		return false, fmt.Errorf("unknown nftables family %q", family)
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval((5 * time.Second).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return false, err
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, err
	}
	const begin, del, end = 1, 2, 3 // sequence numbers
	var batch []byte
	batch = nfMessage(batch, unix.NFNL_MSG_BATCH_BEGIN, 0, begin, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil)
	batch = nfMessage(batch, unix.NFNL_SUBSYS_NFTABLES<<8|unix.NFT_MSG_DELTABLE, unix.NLM_F_ACK, del, fam, 0,
		attribute(unix.NFTA_TABLE_NAME, append([]byte(name), 0)))
	batch = nfMessage(batch, unix.NFNL_MSG_BATCH_END, 0, end, unix.AF_UNSPEC, unix.NFNL_SUBSYS_NFTABLES, nil)
	if err := unix.Sendto(fd, batch, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return false, err
	}
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return false, fmt.Errorf("waiting for the kernel's answer: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return false, err
		}
		for _, m := range msgs {
			if m.Header.Type != unix.NLMSG_ERROR || len(m.Data) < 4 {
				continue
			}
			errno := syscall.Errno(-int32(binary.NativeEndian.Uint32(m.Data)))
			switch {
			case m.Header.Seq == begin && errno == unix.EOPNOTSUPP:
				return false, nil // a kernel without nftables holds no table
			case m.Header.Seq == begin && errno != 0:
				return false, errno
			case m.Header.Seq != del:
			case errno == 0:
				return true, nil
			case errno == unix.ENOENT:
				return false, nil
			default:
				return false, errno
			}
		}
	}
}

// nfMessage appends one nfnetlink message: the netlink header, the
// nfgenmsg header (family, version 0, resource id: the subsystem, in batch
// begin and end messages) and the attributes.
func nfMessage(b []byte, typ, flags uint16, seq uint32, family uint8, resID uint16, attrs []byte) []byte {
	const headers = unix.NLMSG_HDRLEN + 4
	msg := make([]byte, headers, headers+len(attrs))
	binary.NativeEndian.PutUint32(msg[0:], uint32(headers+len(attrs)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|flags)
	binary.NativeEndian.PutUint32(msg[8:], seq)
	msg[16] = family
	binary.BigEndian.PutUint16(msg[18:], resID)
	return append(b, append(msg, attrs...)...)
}

// attribute is one netlink attribute, padded to 4 bytes.
func attribute(typ uint16, data []byte) []byte {
	a := make([]byte, 4, 4+len(data)+3)
	binary.NativeEndian.PutUint16(a[0:], uint16(4+len(data)))
	binary.NativeEndian.PutUint16(a[2:], typ)
	a = append(a, data...)
	for len(a)%4 != 0 {
		a = append(a, 0)
	}
	return a
}
