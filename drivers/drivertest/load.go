package drivertest

import (
	"os"
	"strings"
)

// Load is the machine's load average (1, 5, 15 minutes) as uptime prints
// it, for the context of a benchmark's figures; "unknown" where
// /proc/loadavg cannot be read. Every benchmark that quotes the load uses
// this one reader.
func Load() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return parseLoad(string(b))
}

// parseLoad takes the first three fields of a /proc/loadavg line.
func parseLoad(s string) string {
	f := strings.Fields(s)
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
