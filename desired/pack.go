package desired

import (
	"slices"
	"strings"
)

// pack points each field at a copy of its text in one allocation of them
// all. A cached object's strings come from the decoder, each allocated on
// its own among the decoded object's garbage (a string under 16 bytes in
// a 16-byte block with whatever was allocated next); kept as long as the
// object, each one holds its memory page after the garbage is collected.
func pack(fields ...*string) {
	n := 0
	for _, f := range fields {
		n += len(*f)
	}
	if n == 0 {
		return
	}
	var b strings.Builder
	b.Grow(n)
	for _, f := range fields {
		b.WriteString(*f)
	}
	all := b.String()
	for _, f := range fields {
		*f, all = all[:len(*f)], all[len(*f):]
	}
}

// packSlice packs s's strings; endpoints in a row on one node share its
// name. (Topology hints, rare, keep the decoder's.) The names that
// identify it, which other maps key by and keep past its life, are packed
// apart: a key must not hold every address of a slice long replaced.
func packSlice(s *Slice) {
	pack(&s.Namespace, &s.Name, &s.Service)
	var buf [32]*string
	fields := append(buf[:0], &s.ResourceVersion)
	for i := range s.Ports {
		fields = append(fields, &s.Ports[i].Name)
	}
	for i := range s.Endpoints {
		e := &s.Endpoints[i]
		fields = append(fields, &e.Address)
		if i == 0 || e.NodeName != s.Endpoints[i-1].NodeName {
			fields = append(fields, &e.NodeName)
		}
	}
	pack(fields...)
	for i := 1; i < len(s.Endpoints); i++ {
		if e := &s.Endpoints[i]; e.NodeName == s.Endpoints[i-1].NodeName {
			e.NodeName = s.Endpoints[i-1].NodeName
		}
	}
}

// packService packs s's strings, into lists of its own: those it was read
// with are the decoded object's. clusterIP shares the first cluster IP's
// bytes when they are the same. Its names and UID, kept by other maps past
// its life, are packed apart (see packSlice).
func packService(s *Service) {
	pack(&s.Namespace, &s.Name, (*string)(&s.UID))
	s.ClusterIPs = slices.Clone(s.ClusterIPs)
	s.ExternalIPs = slices.Clone(s.ExternalIPs)
	s.LoadBalancerSourceRanges = slices.Clone(s.LoadBalancerSourceRanges)
	var buf [16]*string
	fields := append(buf[:0], &s.ResourceVersion)
	for _, l := range [][]string{s.ClusterIPs, s.ExternalIPs, s.LoadBalancerSourceRanges} {
		for i := range l {
			fields = append(fields, &l[i])
		}
	}
	for i := range s.Ports {
		fields = append(fields, &s.Ports[i].Name)
	}
	for i := range s.Ingress {
		fields = append(fields, &s.Ingress[i].IP)
	}
	if s.Scheduler != nil {
		fields = append(fields, s.Scheduler)
	}
	sameIP := len(s.ClusterIPs) > 0 && s.ClusterIP == s.ClusterIPs[0]
	if !sameIP {
		fields = append(fields, &s.ClusterIP)
	}
	pack(fields...)
	if sameIP {
		s.ClusterIP = s.ClusterIPs[0]
	}
}
