// Package zpages serves /flagz and /statusz as kube-proxy v1.37 does
// (Kubernetes' component z-pages, on by default since v1.36): plain text for
// people, with a warning that it is not for machines, and the structured
// v1beta1 object as JSON for a client that asks for it by its kind.
package zpages

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"time"
)

// warning is the text pages' second line, as upstream words it.
const warning = "Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only."

// group and apiVersion name the structured pages' API.
const (
	group      = "config.k8s.io"
	apiVersion = group + "/v1beta1"
)

// Flagz serves the command's flags, each with the value in force.
func Flagz(component string, flags map[string]string) http.Handler {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range flags {
			if !yield(n) {
				return
			}
		}
	})
	return page("Flagz", func() any {
		return struct {
			Kind       string            `json:"kind"`
			APIVersion string            `json:"apiVersion"`
			Metadata   map[string]string `json:"metadata"`
			Flags      map[string]string `json:"flags"`
		}{"Flagz", apiVersion, map[string]string{"name": component}, flags}
	}, func(b *strings.Builder) {
		fmt.Fprintf(b, "\n%s flagz\n%s\n", component, warning)
		for _, n := range names {
			fmt.Fprintf(b, "%s=%s\n", n, flags[n])
		}
	})
}

// Statusz serves when the process started, its versions (binary is the
// build's) and the paths its server lists.
func Statusz(component, binary string, started time.Time, paths []string) http.Handler {
	paths = slices.Sorted(slices.Values(paths))
	return page("Statusz", func() any {
		return struct {
			Kind          string            `json:"kind"`
			APIVersion    string            `json:"apiVersion"`
			Metadata      map[string]string `json:"metadata"`
			StartTime     time.Time         `json:"startTime"`
			UptimeSeconds int64             `json:"uptimeSeconds"`
			GoVersion     string            `json:"goVersion"`
			BinaryVersion string            `json:"binaryVersion"`
			Paths         []string          `json:"paths"`
		}{"Statusz", apiVersion, map[string]string{"name": component}, started.UTC(),
			int64(time.Since(started).Seconds()), runtime.Version(), binary, paths}
	}, func(b *strings.Builder) {
		fmt.Fprintf(b, "\n%s statusz\n%s\n\n", component, warning)
		fmt.Fprintf(b, "Started: %s\nUp: %s\nGo version: %s\nBinary version: %s\nPaths: %s\n",
			started.Format(time.UnixDate), time.Since(started).Truncate(time.Second), runtime.Version(), binary, strings.Join(paths, " "))
	})
}

// page answers text unless the Accept header asks for kind as JSON
// (application/json;g=config.k8s.io;v=v1beta1;as=KIND), and 406 for
// anything else, as upstream's negotiation does.
func page(kind string, structured func() any, text func(*strings.Builder)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch negotiate(r.Header.Get("Accept"), kind) {
		case "json":
			w.Header().Set("Content-Type", "application/json;g="+group+";v=v1beta1;as="+kind)
			_ = json.NewEncoder(w).Encode(structured())
		case "text":
			var b strings.Builder
			text(&b)
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(b.String()))
		default:
			http.Error(w, fmt.Sprintf("media type not acceptable, must be: text/plain or application/json;g=%s;v=v1beta1;as=%s", group, kind),
				http.StatusNotAcceptable)
		}
	})
}

// negotiate picks "text", "json" or "" (nothing acceptable) from an Accept
// header, taking its media ranges in order.
func negotiate(accept, kind string) string {
	if strings.TrimSpace(accept) == "" {
		return "text"
	}
	for _, part := range strings.Split(accept, ",") {
		typ, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch {
		case typ == "application/json" && params["g"] == group && params["v"] == "v1beta1" && params["as"] == kind:
			return "json"
		case typ == "text/plain" || typ == "text/*" || typ == "*/*":
			return "text"
		}
	}
	return ""
}
