// Package view is the running proxier's state as an operator reads it
// (/debug/state, kube-ipvs-proxy status): per Service, what it wants, what
// the kernel is believed to hold of it, and its failed objects. Plain data,
// the same in JSON on both sides.
package view

import (
	"time"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
)

// State is the view of some or all Services. Failed lists every failed
// object, those no Service wants included (a removal, the kernel setup).
type State struct {
	Services []Service       `json:"services"`
	Failed   []status.Object `json:"failed"`
}

// Service is one Service's objects, wanted and believed held.
type Service struct {
	Name           string          `json:"name"`
	VirtualServers []VirtualServer `json:"virtualServers,omitempty"`
	Addresses      []Member        `json:"addresses,omitempty"`
	Entries        []Member        `json:"entries,omitempty"`
	Failed         []status.Object `json:"failed,omitempty"`
	// Programmed is when every object of the Service was last as wanted in
	// the kernel; zero while it waits for its first write.
	Programmed time.Time `json:"programmed,omitzero"`
}

// VirtualServer is a wanted virtual server: held says the kernel is
// believed to hold it with these attributes.
type VirtualServer struct {
	Key       string `json:"key"`
	Scheduler string `json:"scheduler"`
	Flags     uint32 `json:"flags,omitempty"`
	Timeout   uint32 `json:"timeout,omitempty"`
	Held      bool   `json:"held"`
	Reals     []Real `json:"reals,omitempty"`
}

// Real is a real server wanted, or held and no longer wanted (one that
// drains). Weight is the wanted weight, or the held one if unwanted.
type Real struct {
	Address string `json:"address"`
	Weight  int    `json:"weight"`
	Wanted  bool   `json:"wanted"`
	Held    bool   `json:"held"`
}

// Member is an address or a set entry and whether it is held.
type Member struct {
	Object string `json:"object"`
	Held   bool   `json:"held"`
}
