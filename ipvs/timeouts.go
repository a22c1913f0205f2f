package ipvs

import (
	"fmt"
	"time"

	mobyipvs "github.com/moby/ipvs"
)

// Timeouts are IPVS's connection timeouts (ipvsadm --set): established TCP,
// TCP after a FIN, and UDP. Zero leaves the kernel's value as it is.
type Timeouts struct {
	TCP, TCPFin, UDP time.Duration
}

// SetTimeouts writes the non-zero timeouts (the kernel keeps a zero one
// unchanged). It is one plain request, made once at start-up, so it goes
// through moby/ipvs rather than the batched path.
func SetTimeouts(t Timeouts) error {
	if t == (Timeouts{}) {
		return nil
	}
	h, err := mobyipvs.New("")
	if err != nil {
		return fmt.Errorf("open IPVS: %w", err)
	}
	defer h.Close()
	if err := h.SetConfig(&mobyipvs.Config{TimeoutTCP: t.TCP, TimeoutTCPFin: t.TCPFin, TimeoutUDP: t.UDP}); err != nil {
		return fmt.Errorf("set IPVS timeouts (tcp %s, tcpfin %s, udp %s): %w", t.TCP, t.TCPFin, t.UDP, err)
	}
	return nil
}

// GetTimeouts reads the kernel's timeouts.
func GetTimeouts() (Timeouts, error) {
	h, err := mobyipvs.New("")
	if err != nil {
		return Timeouts{}, fmt.Errorf("open IPVS: %w", err)
	}
	defer h.Close()
	c, err := h.GetConfig()
	if err != nil {
		return Timeouts{}, fmt.Errorf("get IPVS timeouts: %w", err)
	}
	return Timeouts{TCP: c.TimeoutTCP, TCPFin: c.TimeoutTCPFin, UDP: c.TimeoutUDP}, nil
}
