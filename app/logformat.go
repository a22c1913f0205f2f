package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// The two formats of kube-proxy's logs (k8s.io/component-base), written by
// zap, so that log pipelines that parse kube-proxy's lines parse ours:
//
//	text: klog's header and structured form
//	      I1127 08:00:00.123456    1234 run.go:80] "msg" key="value" n=3
//	json: {"ts":1764230400123.456,"caller":"app/run.go:80","msg":"msg","v":0,"key":"value"}
//
// klog has no level between Info and Error but Warning, which the text
// header marks W; in JSON, as in component-base's, a line is either an
// error (with "err") or an info line of a verbosity ("v"). Our per-sync
// details (Debug) are verbosity 4, the -v that turns them on.
const debugVerbosity = 4

var bufferPool = buffer.NewPool()

// klogEncoder writes klog's text form. The fields are encoded by a JSON
// encoder (which also holds the logger's With fields), then rewritten as
// klog writes them: strings and other values quoted, numbers and booleans
// bare.
type klogEncoder struct {
	zapcore.Encoder // the fields, as JSON
	pid             int
}

func newKlogEncoder() zapcore.Encoder {
	return &klogEncoder{Encoder: zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		EncodeDuration: zapcore.StringDurationEncoder, EncodeTime: zapcore.RFC3339NanoTimeEncoder,
	}), pid: os.Getpid()}
}

func (e *klogEncoder) Clone() zapcore.Encoder {
	return &klogEncoder{Encoder: e.Encoder.Clone(), pid: e.pid}
}

func (e *klogEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	kv, err := e.Encoder.EncodeEntry(zapcore.Entry{}, fields)
	if err != nil {
		return nil, err
	}
	defer kv.Free()
	out := bufferPool.Get()
	sev := byte('I')
	switch {
	case ent.Level >= zapcore.ErrorLevel:
		sev = 'E'
	case ent.Level == zapcore.WarnLevel:
		sev = 'W'
	}
	t := ent.Time
	out.AppendByte(sev)
	out.AppendString(t.Format("0102 15:04:05.000000"))
	out.AppendString(fmt.Sprintf(" %7d ", e.pid))
	if ent.Caller.Defined {
		out.AppendString(filepath.Base(ent.Caller.File))
		out.AppendByte(':')
		out.AppendInt(int64(ent.Caller.Line))
	} else {
		out.AppendString("???:1")
	}
	out.AppendString("] ")
	out.AppendString(strconv.Quote(ent.Message))
	if ent.LoggerName != "" {
		out.AppendString(" logger=" + strconv.Quote(ent.LoggerName))
	}
	if err := appendKlogPairs(out, kv.Bytes()); err != nil {
		return nil, err
	}
	out.AppendByte('\n')
	return out, nil
}

// appendKlogPairs writes a JSON object's members as klog's key=value pairs,
// in order.
func appendKlogPairs(out *buffer.Buffer, obj []byte) error {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // {
		return err
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		out.AppendByte(' ')
		out.AppendString(fmt.Sprint(k))
		out.AppendByte('=')
		switch {
		case len(v) > 0 && v[0] == '"':
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return err
			}
			out.AppendString(strconv.Quote(s))
		case len(v) > 0 && (v[0] == '{' || v[0] == '['):
			out.AppendString(strconv.Quote(string(v))) // klog quotes a structure's printed form
		default: // a number, true, false or null
			out.AppendString(string(v))
		}
	}
	return nil
}

// componentBaseJSON is component-base's JSON logger's encoding: no level
// key, the time in milliseconds since the epoch, the caller's short path.
func componentBaseJSON() zapcore.Encoder {
	return zapcore.NewJSONEncoder(zapcore.EncoderConfig{
		MessageKey: "msg", CallerKey: "caller", NameKey: "logger", TimeKey: "ts",
		EncodeTime: func(t time.Time, enc zapcore.PrimitiveArrayEncoder) {
			enc.AppendFloat64(float64(t.UnixNano()) / float64(time.Millisecond))
		},
		EncodeDuration: zapcore.StringDurationEncoder,
		EncodeCaller:   zapcore.ShortCallerEncoder,
	})
}

// kubeCore writes an error under klog's key "err", not zap's "error" and,
// for JSON (verbosity), gives every line below Error a "v" as
// component-base's JSON lines have: 0, or 4 for Debug.
type kubeCore struct {
	zapcore.Core
	verbosity bool
}

func (c kubeCore) With(fields []zapcore.Field) zapcore.Core {
	return kubeCore{c.Core.With(renameErrors(fields)), c.verbosity}
}

func (c kubeCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c kubeCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	fields = renameErrors(fields)
	if c.verbosity && ent.Level < zapcore.ErrorLevel && !slices.ContainsFunc(fields, func(f zapcore.Field) bool { return f.Key == "v" }) {
		v := 0
		if ent.Level == zapcore.DebugLevel {
			v = debugVerbosity
		}
		fields = append([]zapcore.Field{zap.Int("v", v)}, fields...)
	}
	return c.Core.Write(ent, fields)
}

// renameErrors returns fields with zap.Error's key "error" as "err"; the
// caller's slice is left as it is.
func renameErrors(fields []zapcore.Field) []zapcore.Field {
	isErr := func(f zapcore.Field) bool { return f.Key == "error" && f.Type == zapcore.ErrorType }
	if !slices.ContainsFunc(fields, isErr) {
		return fields
	}
	out := slices.Clone(fields)
	for i := range out {
		if isErr(out[i]) {
			out[i].Key = "err"
		}
	}
	return out
}

// vmodule is --vmodule parsed: klog's comma-separated pattern=N, each
// pattern a glob on a source file's name without ".go" (with a "/", on as
// many of the path's last parts), the first match setting that file's
// verbosity instead of -v. Only Debug lines (verbosity 4) depend on it.
type vmodule []vmoduleRule

type vmoduleRule struct {
	pattern string
	v       int
}

func parseVModule(s string) (vmodule, error) {
	var m vmodule
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		pat, n, ok := strings.Cut(part, "=")
		v, err := strconv.Atoi(n)
		if _, perr := path.Match(pat, ""); !ok || pat == "" || err != nil || v < 0 || perr != nil {
			return nil, fmt.Errorf("%q: want pattern=N, comma-separated, as klog's", part)
		}
		m = append(m, vmoduleRule{pat, v})
	}
	return m, nil
}

// max is the highest verbosity a rule sets.
func (m vmodule) max() int {
	top := 0
	for _, r := range m {
		top = max(top, r.v)
	}
	return top
}

// verbosity is file's verbosity: the first rule it matches, else v.
func (m vmodule) verbosity(file string, v int) int {
	parts := strings.Split(strings.TrimSuffix(file, ".go"), "/")
	for _, r := range m {
		n := min(strings.Count(r.pattern, "/")+1, len(parts))
		if ok, _ := path.Match(r.pattern, strings.Join(parts[len(parts)-n:], "/")); ok {
			return r.v
		}
	}
	return v
}

// vmoduleCore drops the Debug lines of files whose verbosity (-v, or
// --vmodule's for the file) is under 4; the core under it takes them all.
type vmoduleCore struct {
	zapcore.Core
	m vmodule
	v int
}

func (c vmoduleCore) With(fields []zapcore.Field) zapcore.Core {
	return vmoduleCore{c.Core.With(fields), c.m, c.v}
}

func (c vmoduleCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

// Write decides on the caller, which zap fills in only after Check.
func (c vmoduleCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	if ent.Level == zapcore.DebugLevel && c.m.verbosity(ent.Caller.File, c.v) < debugVerbosity {
		return nil
	}
	return c.Core.Write(ent, fields)
}
