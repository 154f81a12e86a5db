package drivertest

import (
	"os"
	"strings"
	"testing"
)

// Required reports whether ENGENHO_REQUIRE names component ("incus", "s3").
// CI sets ENGENHO_REQUIRE=incus,s3 so a missing component fails the run
// instead of skipping.
func Required(component string) bool {
	for _, c := range strings.Split(os.Getenv("ENGENHO_REQUIRE"), ",") {
		if strings.TrimSpace(c) == component {
			return true
		}
	}
	return false
}

// Need skips t with a printed reason when component is unavailable on this
// machine, or fails it when ENGENHO_REQUIRE names the component.
func Need(t testing.TB, component string, available bool, reason string) {
	t.Helper()
	if available {
		return
	}
	if Required(component) {
		t.Fatalf("%s required by ENGENHO_REQUIRE but unavailable: %s", component, reason)
	}
	t.Skipf("SKIP %s unavailable: %s (set up with .ci/run; ENGENHO_REQUIRE=%s makes this fail)", component, reason, component)
}
