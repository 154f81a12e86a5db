package drivertest

import (
	"slices"
	"time"

	"github.com/engenho/engenho/drivers"
)

// Feature names an optional part of the driver contract. A harness lists the
// ones its driver lacks; the suite then checks that the driver answers those
// calls with ErrUnsupported instead of testing the behaviour.
type Feature string

const (
	// FeatureWatch: Watch reports the end of a run.
	FeatureWatch Feature = "watch"
	// FeatureExec: Exec runs a command inside a running instance.
	FeatureExec Feature = "exec"
	// FeatureLogs: Logs returns the instance's output.
	FeatureLogs Feature = "logs"
	// FeatureFollow: Logs with Follow streams new output until ctx ends.
	FeatureFollow Feature = "follow"
	// FeaturePid: Status.Pid of a running instance is > 0. Lacking it, the
	// suite does not look at Pid and there is no error to check.
	FeaturePid Feature = "pid"
)

// Harness adapts one driver to the suite.
//
// Scripts. Spec receives a POSIX sh snippet; the driver must run it as
// `sh -c SCRIPT` (the process driver on the host, incus inside a busybox
// container). The suite's scripts only use these statements, separated by
// "; ", so a backend with no shell (the fake) can interpret them:
//
//	echo WORD...         one line on stdout
//	echo WORD... >&2     one line on stderr
//	sleep N              N seconds, N an integer or a decimal like 0.5
//	exit N               end the run with exit code N
//	trap '' TERM         ignore SIGTERM from here on (children inherit it)
//
// A script that reaches its end exits 0. Exec probes are argv
// {"sh", "-c", SCRIPT} with the same subset.
type Harness struct {
	// Driver is the driver under test. The suite creates instances named
	// Prefix-RUNID-TAG (valid under drivers.CheckName, at most 30
	// characters) and deletes every one it created before Run returns.
	Driver drivers.Driver
	// Spec builds a spec named name that runs script with labels.
	Spec func(name, script string, labels drivers.Labels) drivers.Spec
	// Lacks lists the optional features the driver does not have.
	Lacks []Feature
	// Grace is passed to Stop (default 200ms).
	Grace time.Duration
	// Timeout bounds each driver call and each wait for an eventual state,
	// in real time (default 30s). It only turns a hang into a failure; the
	// suite never asserts how long anything takes.
	Timeout time.Duration
	// Prefix starts every instance name (default "dt").
	Prefix string
}

// Has reports whether the harness's driver has feature f.
func (h Harness) Has(f Feature) bool { return !slices.Contains(h.Lacks, f) }

func (h Harness) withDefaults() Harness {
	if h.Grace <= 0 {
		h.Grace = 200 * time.Millisecond
	}
	if h.Timeout <= 0 {
		h.Timeout = 30 * time.Second
	}
	if h.Prefix == "" {
		h.Prefix = "dt"
	}
	return h
}
