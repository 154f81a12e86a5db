package process_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// helperEnv makes the test binary act as a helper process instead of
// running tests: see helper_test.go.
const helperEnv = "ENGENHO_PROCESS_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	goleak.VerifyTestMain(m)
}
