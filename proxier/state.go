package proxier

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/ipvs"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/view"
)

// State is what the proxier wants of the named Services (all if none is
// named) and believes the kernel holds (see Reconciler.State), with the
// kernel setup among the failed objects. It waits for a sync in progress.
func (p *Proxier) State(names ...types.NamespacedName) view.State {
	p.mu.Lock()
	setup := p.setup.status.AppendFailed(nil)
	p.mu.Unlock()
	s := p.rec.State(names...)
	s.Failed = append(s.Failed, setup...)
	return s
}

// VirtualServerOwners names the Service that wants each virtual server.
func (p *Proxier) VirtualServerOwners() map[ipvs.Key]string { return p.rec.VirtualServerOwners() }
