package conformance

import (
	"testing"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/dummyiface"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/iptables"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// The fakes pass the cases the kernel passes (e2e/conformance_test.go).
func TestFakeIPVS(t *testing.T) { IPVS(t, ipvs.NewFake()) }
func TestFakeSets(t *testing.T) { Sets(t, ipset.NewFake()) }
func TestFakeLinks(t *testing.T) {
	l := dummyiface.NewFake()
	NoLink(t, l)
	Links(t, l)
}
func TestFakeIPTables(t *testing.T) { IPTables(t, &iptables.Fake{}) }
