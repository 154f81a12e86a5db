package drivertest

import (
	"strings"
	"testing"
)

// Load quotes the three load averages of /proc/loadavg, and says
// "unknown" rather than something half read.
func TestLoad(t *testing.T) {
	for in, want := range map[string]string{
		"0.52 1.15 1.13 2/345 6789\n": "0.52 1.15 1.13",
		"3.00  2.50\t2.00":            "3.00 2.50 2.00",
		"":                            "unknown",
		"0.52 1.15":                   "unknown",
	} {
		if got := parseLoad(in); got != want {
			t.Errorf("parseLoad(%q) = %q, want %q", in, got, want)
		}
	}
	// On this machine: three numbers, or unknown where there is no /proc.
	if got := Load(); got != "unknown" && len(strings.Fields(got)) != 3 {
		t.Errorf("Load() = %q, want three fields or unknown", got)
	}
}
