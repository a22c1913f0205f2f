// Package framework is what the e2e tests and the demo share inside the VM:
// pods made of network namespaces, the proxier as a child process, readings
// of the real kernel, and builders for the API objects.
//
// It runs only inside the test VM (as root, on a kernel with IPVS); nothing
// here may touch an address outside the VM's own namespaces.
package framework
