package desired

// Config is what Compute needs besides the API objects and the node.
type Config struct {
	NodeName  string
	Scheduler string // --ipvs-scheduler: Services' scheduler; empty is DefaultScheduler
	// IPv6Capable says the node has IPv6: IPv6 Services are programmed.
	// Without it they are skipped, each with a problem.
	IPv6Capable bool
	// IgnoreExternalIPs (--feature-gates=AllowServiceExternalIPs=false)
	// programs no Service's external IPs, as kube-proxy v1.37 with that
	// gate off: the Service is as if it had none.
	IgnoreExternalIPs bool
}

// DefaultScheduler is kube-proxy's --ipvs-scheduler default: round robin.
const DefaultScheduler = "rr"

// Schedulers are the IPVS schedulers kube-proxy accepts, for
// --ipvs-scheduler and SchedulerAnnotation.
var Schedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "sh", "dh", "sed", "nq", "mh"}

// SchedulerAnnotation on a Service picks its IPVS scheduler, overriding
// --ipvs-scheduler for that Service alone.
const SchedulerAnnotation = "kube-ipvs-proxy.io/ipvs-scheduler"
