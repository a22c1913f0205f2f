package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/diff"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/healthz"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/informers"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/metrics"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/proxier"
)

// Exit codes of diff and status besides 0: something found (drift, failed
// objects), and an error.
const (
	exitFound = 1
	exitError = 2
)

// diffCommand compares the kernel with what the proxier wants, writing
// nothing: safe on a live node. It takes the proxier's flags and --config,
// so that it computes as the running proxier does.
func diffCommand() *cli.Command {
	return &cli.Command{
		Name:  "diff",
		Usage: "show where the kernel differs from the desired state (read-only); exit 0 when equal, 1 on drift, 2 on error",
		Flags: append([]cli.Flag{&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json"}},
			Flags()...),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			format, o, err := toolOptions(c)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.Context, diffTimeout)
			defer cancel()
			rows, err := kernelDiff(ctx, o)
			if err != nil {
				return cli.Exit("diff: "+err.Error(), exitError)
			}
			if err := printDiff(c.App.Writer, format, rows); err != nil {
				return cli.Exit(err.Error(), exitError)
			}
			if len(rows) > 0 {
				return cli.Exit("", exitFound)
			}
			return nil
		},
	}
}

// toolOptions reads what diff and status take: --output, and the
// proxier's own options, so that they see what it sees. Its error is the
// command's exit.
func toolOptions(c *cli.Context) (format string, o *Options, err error) {
	format = c.String("output")
	if format != "table" && format != "json" {
		return "", nil, cli.Exit(fmt.Sprintf("--output %q: one of table, json", format), exitError)
	}
	if o, err = NewOptions(c); err != nil {
		return "", nil, cli.Exit(err.Error(), exitError)
	}
	return format, o, nil
}

const (
	// diffTimeout bounds listing the API objects and reading the kernel.
	diffTimeout = 5 * time.Minute
	// reachTimeout bounds the first request, which only asks whether the
	// apiserver is there.
	reachTimeout = 15 * time.Second
	// waitNotice is how often diff says it is still waiting for the lists.
	waitNotice = 5 * time.Second
)

// kernelDiff runs one sync of a proxier on a kernel that records writes
// instead of making them (package diff), and returns them.
func kernelDiff(ctx context.Context, o *Options) ([]diff.Row, error) {
	client, err := newClient(o.Client, false)
	if err != nil {
		return nil, err
	}
	// An apiserver that cannot be reached fails diff at once, as it fails
	// kubectl; one that answers slowly is waited for, and said so.
	probe, cancel := context.WithTimeout(ctx, reachTimeout)
	err = client.Reachable(probe)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("cannot reach the apiserver: %w", err)
	}
	kernel, err := proxier.NewKernel(o.Kernel.IPv6)
	if err != nil {
		return nil, fmt.Errorf("open the kernel tables: %w", err)
	}
	k, recorded := diff.Recording(kernel)
	cfg := o.Proxier
	// No port of the running proxier's is taken, and no Service comes
	// first: the writes are only recorded.
	cfg.ServeNoHealthChecks, cfg.CriticalServices = true, nil
	// The netlink ipset code reports attributes it does not parse through
	// the standard logger (see run).
	stdlog.SetOutput(io.Discard)
	synced := make(chan struct{})
	cfg.AfterFirstSync = func() { close(synced) }
	// Warnings only, on stderr: why a read failed, what input is skipped.
	log := zap.New(zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zap.WarnLevel))
	p := proxier.New(cfg, k, log, healthz.New(2*cfg.SyncPeriod), metrics.New(), noEvents{})
	h := &syncedHandlers{Proxier: p, services: make(chan struct{}), slices: make(chan struct{})}
	if err := informers.Start(ctx, client, cfg.Desired.NodeName, o.ConfigSyncPeriod, h, h, h, nil); err != nil {
		return nil, err
	}
	waiting := time.NewTicker(waitNotice)
	defer waiting.Stop()
	start := time.Now()
	for _, ch := range []chan struct{}{h.services, h.slices} {
		for listed := false; !listed; {
			select {
			case <-ch:
				listed = true
			case <-waiting.C:
				fmt.Fprintf(os.Stderr, "diff: waiting for the apiserver to list Services, EndpointSlices and Node %s (%s)\n",
					cfg.Desired.NodeName, time.Since(start).Round(time.Second))
			case <-ctx.Done():
				return nil, fmt.Errorf("list Services, EndpointSlices and Node %s: %w", cfg.Desired.NodeName, ctx.Err())
			}
		}
	}
	p.SyncNow()
	select {
	case <-synced:
	case <-time.After(5 * time.Second):
		// A first sync that could not read the kernel wrote nothing: its
		// rows would be a part of the differences.
		return nil, fmt.Errorf("the sync did not complete (see the warnings above)")
	}
	return recorded.Rows()
}

// syncedHandlers are the proxier's informer handlers, telling when each
// list is complete.
type syncedHandlers struct {
	*proxier.Proxier
	services, slices chan struct{}
}

func (h *syncedHandlers) OnServicesSynced() {
	h.Proxier.OnServicesSynced()
	close(h.services)
}

func (h *syncedHandlers) OnEndpointSlicesSynced() {
	h.Proxier.OnEndpointSlicesSynced()
	close(h.slices)
}

// noEvents drops the Events of a one-shot sync: the running proxier posts them.
type noEvents struct{}

func (noEvents) Eventf(_, _ runtime.Object, _, _, _, _ string, _ ...any) {}

// printDiff prints rows as a table or as JSON.
func printDiff(w io.Writer, format string, rows []diff.Row) error {
	if format == "json" {
		if rows == nil {
			rows = []diff.Row{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "The kernel holds the desired state.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tCHANGE\tOBJECT\tWANT\tHAVE")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Kind, r.Change, r.Object, r.Want, r.Have)
	}
	return tw.Flush()
}
