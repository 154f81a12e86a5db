package process_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/engenho/engenho/drivers/drivertest"

	"go.uber.org/goleak"
)

// helperEnv makes the test binary act as a helper process instead of
// running tests: see helper_test.go.
const helperEnv = "ENGENHO_PROCESS_HELPER"

// cgroupRoot is this test process's cgroup subtree (DRV-12); helper
// processes get it through cgroupRootEnv, so a driver in the test adopts
// what theirs started.
var cgroupRoot = os.Getenv(cgroupRootEnv)

const cgroupRootEnv = "ENGENHO_PROCESS_TEST_CGROUP_ROOT"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	cgroupRoot = drivertest.CgroupRoot("process")
	os.Setenv(cgroupRootEnv, cgroupRoot)
	goleak.VerifyTestMain(cleaning{m})
}

// cleaning runs the tests, then removes the cgroups they made (the
// lingering ones of tests that leave workloads running on purpose) before
// goleak's verdict ends the process.
type cleaning struct{ m *testing.M }

func (e cleaning) Run() int {
	code := e.m.Run()
	if _, err := drivertest.CleanCgroups(cgroupRoot); err != nil {
		fmt.Fprintln(os.Stderr, "cleaning the test cgroups:", err)
		code = 1
	}
	return code
}
