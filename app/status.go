package app

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/status"
	"github.com/kube-ipvs-proxy/kube-ipvs-proxy/view"
)

// statusCommand prints the running proxier's view, a line per Service,
// from /debug/state on its metrics address.
func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "show the running proxier's Services: virtual servers, real servers held and wanted, failed objects; exit 0, 1 when some object failed, 2 on error",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "table", Usage: "table or json (/debug/state as served)"},
			&cli.StringSliceFlag{Name: "service", Usage: "only this Service, namespace/name (repeatable)"}},
			Flags()...),
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			format, o, err := toolOptions(c)
			if err != nil {
				return err
			}
			body, err := fetchState(o.MetricsAddress, c.StringSlice("service"))
			if err != nil {
				return cli.Exit("status: "+err.Error(), exitError)
			}
			var st view.State
			if err := json.Unmarshal(body, &st); err != nil {
				return cli.Exit("status: /debug/state: "+err.Error(), exitError)
			}
			if format == "json" {
				_, err = c.App.Writer.Write(body)
			} else {
				err = printStatus(c.App.Writer, st, time.Now())
			}
			if err != nil {
				return cli.Exit(err.Error(), exitError)
			}
			if len(st.Failed) > 0 {
				return cli.Exit("", exitFound)
			}
			return nil
		},
	}
}

// fetchState gets /debug/state from the metrics address, on loopback when
// the proxier listens on every address.
func fetchState(addr string, services []string) ([]byte, error) {
	if addr == "" {
		return nil, fmt.Errorf("no metrics address (--metrics-bind-address is empty): the proxier serves no /debug/state")
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-bind-address %q: %w", addr, err)
	}
	if a, err := netip.ParseAddr(host); host == "" || err == nil && a.IsUnspecified() {
		host = "127.0.0.1"
	}
	q := url.Values{"service": services}
	u := url.URL{Scheme: "http", Host: net.JoinHostPort(host, port), Path: "/debug/state", RawQuery: q.Encode()}
	client := http.Client{Timeout: time.Minute}
	resp, err := client.Get(u.String())
	if err != nil {
		return nil, fmt.Errorf("is the proxier running? %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %s", u.String(), resp.Status, strings.TrimSpace(string(body)))
	}
	return body, nil
}

// printStatus prints a line per Service, then the failed objects no
// Service wants (being removed) and the setup's.
func printStatus(w io.Writer, st view.State, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tVIRTUAL SERVERS\tREAL SERVERS\tSCHEDULER\tPROGRAMMED\tFAILED")
	owned := map[string]bool{}
	for _, s := range st.Services {
		var keys, scheds []string
		held, wanted := 0, 0
		for _, v := range s.VirtualServers {
			keys = append(keys, v.Key)
			if len(scheds) == 0 || scheds[len(scheds)-1] != v.Scheduler {
				scheds = append(scheds, v.Scheduler)
			}
			for _, r := range v.Reals {
				if r.Wanted {
					wanted++
					if r.Held {
						held++
					}
				}
			}
		}
		programmed := "pending"
		if !s.Programmed.IsZero() {
			programmed = now.Sub(s.Programmed).Round(time.Second).String() + " ago"
		}
		failed := "-"
		for _, f := range s.Failed {
			owned[string(f.Kind)+" "+f.Object] = true
		}
		if len(s.Failed) > 0 {
			failed = fmt.Sprintf("%d: %s", len(s.Failed), describeFailure(s.Failed[0], now))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", s.Name, abbreviate(keys, 3), held, wanted, strings.Join(scheds, ","), programmed, failed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range st.Failed {
		if !owned[string(f.Kind)+" "+f.Object] {
			fmt.Fprintf(w, "failed %s\n", describeFailure(f, now))
		}
	}
	return nil
}

// describeFailure is a failed object's error and when it is retried.
func describeFailure(f status.Object, now time.Time) string {
	retry := "retry now"
	if d := f.RetryAt.Sub(now); d > 0 {
		retry = "retry in " + d.Round(time.Second).String()
	}
	return fmt.Sprintf("%s %s: %v (%d attempts, %s)", f.Kind, f.Object, f.Err, f.Attempts, retry)
}

// abbreviate joins the first n of list and counts the rest.
func abbreviate(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, ",")
	}
	return fmt.Sprintf("%s +%d", strings.Join(list[:n], ","), len(list)-n)
}
