package fakekernel

import (
	"net/netip"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipset"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
)

// Sink is a kernel that takes every write and keeps nothing, so that a
// measurement of the heap sees the proxier's memory alone. It reads as
// empty, with the link and every set present.
type Sink struct{}

func (Sink) VirtualServers() ([]ipvs.VirtualServer, error) { return nil, nil }
func (Sink) GetVirtualServer(ipvs.Key) (ipvs.VirtualServer, bool, error) {
	return ipvs.VirtualServer{}, false, nil
}
func (Sink) RealServers(ipvs.Key) ([]ipvs.RealServer, error) { return nil, nil }
func (Sink) Write(ops []ipvs.Op) []error                     { return make([]error, len(ops)) }
func (Sink) EnsureLink() error                               { return nil }
func (Sink) Exists() (bool, error)                           { return true, nil }
func (Sink) Addresses() ([]netip.Addr, error)                { return nil, nil }
func (Sink) AddAddresses(a []netip.Addr) []error             { return make([]error, len(a)) }
func (Sink) DeleteAddresses(a []netip.Addr) []error          { return make([]error, len(a)) }
func (Sink) EnsureSet(ipset.Set) error                       { return nil }
func (Sink) Entries(string) ([]ipset.Entry, error)           { return nil, nil }
func (Sink) Count(string) (int, error)                       { return 0, nil }
func (Sink) Has(string, ipset.Entry) (bool, error)           { return false, nil }
func (Sink) AddEntries(_ string, e []ipset.Entry) []error    { return make([]error, len(e)) }
func (Sink) DeleteEntries(_ string, e []ipset.Entry) []error { return make([]error, len(e)) }
func (Sink) Capacity(string) (int, error)                    { return 1 << 30, nil }
func (Sink) Grow(ipset.Set, uint32) error                    { return nil }
