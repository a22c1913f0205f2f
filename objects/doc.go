// Package objects holds the values of the kernel objects the proxier
// programs: IPVS virtual and real servers, ipset definitions and entries.
// Plain data, no kernel access: desired state is made of them (package
// desired), and the kernel packages (ipvs, ipset) read and write them,
// naming them by aliases of their own.
package objects
