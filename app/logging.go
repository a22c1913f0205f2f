package app

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
)

// newLogger builds the process's logger: --logging-format picks kube-proxy's
// text (klog's) or JSON (component-base's) form (logformat.go), and -v 4
// or more turns on the per-sync details, in the files --vmodule names or
// all. Everything goes to stderr, as klog writes it.
func newLogger(v int, format, vmoduleFlag string) (*zap.Logger, error) {
	m, err := parseVModule(vmoduleFlag)
	if err != nil {
		return nil, fmt.Errorf("--vmodule: %w", err)
	}
	level := zap.NewAtomicLevelAt(zap.InfoLevel)
	if max(v, m.max()) >= debugVerbosity {
		level.SetLevel(zap.DebugLevel)
	}
	out := zapcore.Lock(os.Stderr)
	var core zapcore.Core
	switch format {
	case "text", "":
		core = kubeCore{zapcore.NewCore(newKlogEncoder(), out, level), false}
	case "json":
		core = kubeCore{zapcore.NewCore(componentBaseJSON(), out, level), true}
	default:
		return nil, fmt.Errorf("--logging-format=%q: one of text, json", format)
	}
	if len(m) > 0 {
		core = vmoduleCore{core, m, v}
	}
	return zap.New(core, zap.AddCaller(), zap.ErrorOutput(out)), nil
}

// routeKlog sends what client-go logs through klog (a watch that ended,
// a relist, a throttled request) to log. Without it those lines reach
// stderr in klog's own format, which breaks a JSON log, and ignore -v.
// A klog line of verbosity n is written, at Info, when n <= v, as klog
// itself would.
func routeKlog(log *zap.Logger, v int) {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	_ = fs.Set("v", strconv.Itoa(v))
	sink := &klogSink{log: log.Named("client-go").WithOptions(zap.WithCaller(false)), v: v}
	klog.SetLoggerWithOptions(logr.New(sink), klog.ContextualLogger(true))
}

// klogSink is the logr.LogSink klog writes to.
type klogSink struct {
	log *zap.Logger
	v   int
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func (s *klogSink) Enabled(level int) bool { return level <= s.v }

func (s *klogSink) Info(level int, msg string, kv ...any) {
	fields := zapFields(kv)
	if level > 0 {
		fields = append(fields, zap.Int("v", level))
	}
	s.log.Info(msg, fields...)
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	s.log.Error(msg, append(zapFields(kv), zap.Error(err))...)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{log: s.log.With(zapFields(kv)...), v: s.v}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	return &klogSink{log: s.log.Named(name), v: s.v}
}

// zapFields turns logr's alternating keys and values into fields; a key
// that is not a string, or a last key without its value, is kept under
// printed form rather than dropped.
func zapFields(kv []any) []zap.Field {
	fields := make([]zap.Field, 0, (len(kv)+1)/2)
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		if i+1 == len(kv) {
			fields = append(fields, zap.Any(key, "(missing value)"))
			break
		}
		fields = append(fields, zap.Any(key, kv[i+1]))
	}
	return fields
}
