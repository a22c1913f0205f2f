package iptables

import (
	"bytes"

	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch"
)

// The nft backend changes tables only by transactions, and the kernel
// numbers each one it commits: the ruleset's generation, one number for
// every table of the network namespace, whoever wrote (iptables-nft, nft,
// firewalld). A generation read before an iptables-save that found our
// chains as wanted, and read again unchanged, says they still are, so the
// proxier's periodic check of its chains runs no iptables-save while
// nothing changes (package glue). The legacy backend keeps no such number.

const (
	nfnlSubsysNFTables = 10 // NFNL_SUBSYS_NFTABLES
	nftMsgGetGen       = 16 // NFT_MSG_GETGEN
	nftaGenID          = 1  // NFTA_GEN_ID
)

// NFTGeneration reads the generation of the network namespace's nftables
// ruleset.
func NFTGeneration() (uint32, error) {
	c, err := nlbatch.Dial(unix.NETLINK_NETFILTER)
	if err != nil {
		return 0, fmt.Errorf("nftables generation: %w", err)
	}
	defer c.Close()
	body, err := c.Get(nlbatch.Request{Type: nfnlSubsysNFTables<<8 | nftMsgGetGen,
		Data: []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0}}) // struct nfgenmsg
	if err != nil {
		return 0, fmt.Errorf("nftables generation: %w", err)
	}
	if len(body) < 4 {
		return 0, errors.New("nftables generation: short answer")
	}
	var gen uint32
	found := false
	nlbatch.Attrs(body[4:], func(typ uint16, val []byte) {
		if typ&^(nlbatch.Nested|nlbatch.NetByteOrder) == nftaGenID && len(val) == 4 {
			gen, found = uint32(val[0])<<24|uint32(val[1])<<16|uint32(val[2])<<8|uint32(val[3]), true
		}
	})
	if !found {
		return 0, errors.New("nftables generation: no NFTA_GEN_ID in the answer")
	}
	return gen, nil
}

// Generation is the nftables ruleset's generation when e's binaries drive
// nft (see NFTGeneration); ok is false for the legacy backend.
func (e Exec) Generation() (gen uint32, ok bool, err error) {
	if !e.NFT {
		return 0, false, nil
	}
	gen, err = NFTGeneration()
	return gen, err == nil, err
}

// drivesNFT says whether the iptables-save at path uses the nft backend, as
// its version line says: "iptables-save v1.8.9 (nf_tables)".
func drivesNFT(path string) bool {
	out, err := run(DefaultDeadline, nil, true, path, "--version")
	return err == nil && bytes.Contains(out, []byte("nf_tables"))
}

// Generation is the fake's count of restores, when Generations is set.
func (f *Fake) Generation() (gen uint32, ok bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen, f.Generations, nil
}
