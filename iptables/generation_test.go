package iptables

import (
	"fmt"
	"os/exec"
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/internal/nlbatch/nstest"
)

// TestNFTGenerationCountsCommits: in a network namespace of its own, the
// generation moves with each nftables commit, by any program, and holds
// while nothing is committed.
func TestNFTGenerationCountsCommits(t *testing.T) {
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skip("no nft to commit with")
	}
	ns := nstest.New(t)
	var before, still, after uint32
	err = ns.Do(func() error {
		var err error
		if before, err = NFTGeneration(); err != nil {
			return err
		}
		if still, err = NFTGeneration(); err != nil {
			return err
		}
		if out, err := exec.Command(nft, "add", "table", "inet", "kip_generation_test").CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %w: %s", err, out) // not t.Fatal: this runs on Do's goroutine
		}
		after, err = NFTGeneration()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if still != before {
		t.Errorf("the generation moved from %d to %d with no commit", before, still)
	}
	if after == before {
		t.Errorf("the generation stayed %d across a commit", after)
	}
}

// TestDrivesNFTReadsTheVersionLine: iptables-nft-save says nf_tables,
// iptables-legacy-save does not.
func TestDrivesNFTReadsTheVersionLine(t *testing.T) {
	for bin, want := range map[string]bool{"iptables-nft-save": true, "iptables-legacy-save": false} {
		path, err := exec.LookPath(bin)
		if err != nil {
			t.Logf("no %s", bin)
			continue
		}
		if got := drivesNFT(path); got != want {
			t.Errorf("drivesNFT(%s) = %v, want %v", bin, got, want)
		}
	}
}
