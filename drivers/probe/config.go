package probe

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Kind is the kind of probe a healthcheck runs.
type Kind string

// Probe kinds (spec SVC-7). The empty Kind means KindNone.
const (
	KindNone Kind = "none" // no healthcheck: health status "none"
	KindExec Kind = "exec" // a command inside the instance; exit 0 is healthy
	KindHTTP Kind = "http" // GET Path on the instance's address; 2xx/3xx is healthy
	KindTCP  Kind = "tcp"  // a TCP connect to the instance's address
)

// Defaults follow Compose so a stack file behaves as its author expects
// (spec SVC-1). A zero field in Config means "use the default".
const (
	DefaultInterval      = 30 * time.Second
	DefaultTimeout       = 30 * time.Second
	DefaultRetries       = 3
	DefaultStartPeriod   = time.Duration(0)
	DefaultStartInterval = 5 * time.Second
	DefaultPath          = "/"
)

// ErrInvalidConfig is the kind of every Config.Validate error.
var ErrInvalidConfig = errors.New("invalid healthcheck")

// Config is one service's healthcheck. The stack-file layer maps its own
// type onto this one.
type Config struct {
	Kind Kind
	// Command is the argv an exec probe runs inside the instance.
	Command []string
	// Path is the request path of an http probe (default "/").
	Path string
	// Port is the workload's target port an http or tcp probe connects to
	// (a key of drivers.Status.Addresses); 0 means the lowest published one.
	Port int
	// Interval is the time from the end of one probe to the start of the
	// next once the instance has left the starting status.
	Interval time.Duration
	// Timeout bounds one probe; a probe that takes longer is unhealthy.
	Timeout time.Duration
	// Retries is how many consecutive counted failures make the instance
	// unhealthy.
	Retries int
	// StartPeriod is the grace after a start during which failures do not
	// count; a success ends it early.
	StartPeriod time.Duration
	// StartInterval is the cadence while the status is starting.
	StartInterval time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Kind == "" {
		c.Kind = KindNone
	}
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Retries == 0 {
		c.Retries = DefaultRetries
	}
	if c.StartInterval == 0 {
		c.StartInterval = DefaultStartInterval
	}
	return c
}

// Enabled reports whether c runs probes at all.
func (c Config) Enabled() bool { return c.Kind != "" && c.Kind != KindNone }

// Validate checks c (before or after WithDefaults). Errors wrap
// ErrInvalidConfig and name the offending field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch c.Kind {
	case "", KindNone, KindTCP:
	case KindExec:
		if len(c.Command) == 0 || strings.TrimSpace(c.Command[0]) == "" {
			return bad("command", "an exec probe needs a command")
		}
	case KindHTTP:
		if c.Path != "" && !strings.HasPrefix(c.Path, "/") {
			return bad("path", "%q must start with /", c.Path)
		}
	default:
		return bad("kind", "%q is not one of exec, http, tcp, none", c.Kind)
	}
	if c.Port < 0 || c.Port > 65535 {
		return bad("port", "%d is out of range 0-65535", c.Port)
	}
	durations := []struct {
		name string
		d    time.Duration
	}{
		{"interval", c.Interval}, {"timeout", c.Timeout},
		{"start_period", c.StartPeriod}, {"start_interval", c.StartInterval},
	}
	for _, f := range durations {
		if f.d < 0 {
			return bad(f.name, "%s is negative", f.d)
		}
	}
	if c.Retries < 0 {
		return bad("retries", "%d is negative", c.Retries)
	}
	return nil
}
