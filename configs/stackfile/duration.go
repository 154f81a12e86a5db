package stackfile

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The bound and the shapes are the daemon config's too
// (configs/daemonconfig/duration.go); the two parsers do not import each other
// (the target layering puts them side by side), so keep them in step.

// MaxDuration bounds every duration in a stack file. Nothing a
// supervisor waits for is longer, and the bound keeps sums and products
// of durations (a rollout deadline, a jittered wait) far from overflow.
const MaxDuration = 10 * 365 * 24 * time.Hour // 87600h

// durationShape is what a Go duration looks like: signed number-unit
// pairs. A string of this shape that time.ParseDuration refuses is
// out of range.
var durationShape = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

var exponent = regexp.MustCompile(`[0-9.][eE][-+]?[0-9]`)

// parseDuration reads a Go duration string within 0..MaxDuration. A
// refusal says what is wrong with it: out of range, negative, an
// exponent, a missing or unknown unit. kind is ErrType when s is not a
// duration at all, ErrValue when it is one out of range.
func parseDuration(s string) (d time.Duration, kind error, msg string) {
	t := strings.TrimSpace(s)
	d, err := time.ParseDuration(t)
	switch {
	case err == nil && d < 0:
		return 0, ErrValue, fmt.Sprintf("want a duration of 0s or more, got %s", quote(s))
	case err == nil && d > MaxDuration:
		return 0, ErrValue, fmt.Sprintf("%s is too long: at most %s (10 years)", quote(s), hours(MaxDuration))
	case err == nil:
		return d, nil, ""
	case durationShape.MatchString(t) && strings.HasPrefix(t, "-"):
		return 0, ErrValue, fmt.Sprintf("want a duration of 0s or more, got %s", quote(s))
	case durationShape.MatchString(t):
		return 0, ErrValue, fmt.Sprintf("%s is too long: at most %s (10 years)", quote(s), hours(MaxDuration))
	case exponent.MatchString(t):
		return 0, ErrType, fmt.Sprintf("want a duration like 30s or 15m, got %s: write it without an exponent", quote(s))
	case t != "" && strings.Trim(t, "0123456789.+-") == "":
		return 0, ErrType, fmt.Sprintf("want a duration like 30s or 15m, got %s: a number needs a unit (ms, s, m, h)", quote(s))
	}
	return 0, ErrType, fmt.Sprintf("want a duration like 30s or 15m (units ns, us, ms, s, m, h), got %s", quote(s))
}

// hours prints a whole number of hours the way a file would write it.
func hours(d time.Duration) string { return fmt.Sprintf("%dh", d/time.Hour) }
