package probe

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Outcome is what one probe found.
type Outcome int

const (
	// Error means the probe could not run (a driver error, no address, the
	// caller gave up): neither healthy nor unhealthy (SUP-14).
	Error Outcome = iota
	Healthy
	Unhealthy
)

func (o Outcome) String() string {
	switch o {
	case Healthy:
		return "healthy"
	case Unhealthy:
		return "unhealthy"
	default:
		return "error"
	}
}

// MaxOutput bounds Result.Output in bytes.
const MaxOutput = 4096

// Result is one probe's outcome.
type Result struct {
	Outcome Outcome
	// Output is what status shows as the last probe output: the command's
	// output, the HTTP status line and body start, or why it failed.
	// Trimmed and at most MaxOutput bytes of valid UTF-8.
	Output string
	// Duration is how long the probe took.
	Duration time.Duration
	// At is when the probe started.
	At time.Time
}

// boundOutput trims s and cuts it to MaxOutput bytes on a rune boundary.
func boundOutput(s string) string {
	s = strings.ToValidUTF8(strings.TrimSpace(s), "\uFFFD")
	if len(s) <= MaxOutput {
		return s
	}
	cut := MaxOutput
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut])
}
