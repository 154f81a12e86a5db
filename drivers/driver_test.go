package drivers

import "testing"

// SVC-19: the end of a run reads as what is known of it; an adopted run's
// unknown status (code -1) is not shown as "exited with code -1".
func TestExitDescribe(t *testing.T) {
	cases := []struct {
		exit Exit
		want string
	}{
		{Exit{ExitCode: 1}, "exited with code 1"},
		{Exit{ExitCode: 0}, "exited with code 0"},
		{Exit{ExitCode: -1, Signal: "killed"}, "killed by signal killed"},
		{Exit{ExitCode: -1}, "ended; its exit status is unknown (an adopted run, or one its backend does not report)"},
		{Exit{ExitCode: 137, Reason: "oom-killed (limit 64 MiB)"}, "oom-killed (limit 64 MiB)"},
	}
	for _, c := range cases {
		if got := c.exit.Describe(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.exit, got, c.want)
		}
	}
}
