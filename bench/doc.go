// Command bench measures kube-ipvs-proxy beside upstream kube-proxy (IPVS
// mode) and a raw-netlink floor, on the same kernel and the same API objects,
// inside the test VM. `make bench-quick` (1k Services) and `make bench` run it
// and write a run's results.json, report.md, plots and profiles under the
// cache (see the Makefile); bench/baseline keeps the latest full run's.
//
// Scenarios so far: cold start (time until the kernel holds the complete
// state, and until default/kubernetes alone is programmed) and one change
// (an endpoint added to one Service: write → kernel latency), churn, steady
// sync and restart; and, only when asked (-scenarios big-service), one
// Service of 90,300 virtual servers added and deleted while ordinary
// Services change beside it (bigservice.go).
package main
