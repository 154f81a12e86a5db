package daemonconfig

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The bound and the shapes are the stack file's too
// (configs/stackfile/duration.go); the two parsers do not import each
// other (the target layering puts them side by side), so keep
// them in step.

// MaxDuration bounds every duration in the config: nothing the daemon
// waits for is longer, and the bound keeps sums and jittered products of
// durations far from overflow.
const MaxDuration = 10 * 365 * 24 * time.Hour // 87600h

// durationShape is what a Go duration looks like; a string of this shape
// that time.ParseDuration refuses is out of range.
var durationShape = regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)

var exponent = regexp.MustCompile(`[0-9.][eE][-+]?[0-9]`)

const durationWant = "want a duration with a unit such as 90s, 5m or 1h30m"

// parseDuration reads a duration string, saying what is wrong with one
// it refuses: too long, an exponent, a missing unit. A negative one is
// returned as it is: validate says which keys take one.
func parseDuration(s string, show func(any) string) (time.Duration, string) {
	t := strings.TrimSpace(s)
	d, err := time.ParseDuration(t)
	switch {
	case err == nil && d > MaxDuration, err != nil && durationShape.MatchString(t) && !strings.HasPrefix(t, "-"):
		return 0, fmt.Sprintf("%s is too long: at most %dh (10 years)", show(s), MaxDuration/time.Hour)
	case err == nil && d < -MaxDuration, err != nil && durationShape.MatchString(t):
		return 0, fmt.Sprintf("%s is negative and out of range: durations here are 0 or more", show(s))
	case err == nil:
		return d, ""
	case exponent.MatchString(t):
		return 0, durationWant + ", got " + show(s) + ": write it without an exponent"
	case t != "" && strings.Trim(t, "0123456789.+-") == "":
		return 0, durationWant + ", got " + show(s) + ": a number needs a unit"
	}
	return 0, durationWant + ", got " + show(s)
}
