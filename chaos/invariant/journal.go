package invariant

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/engenho/engenho/runtime/lifecycle"
)

// The journal-fault invariants (REL-5).
const (
	// NoTrace: the daemon never crashes and never prints a Go trace, on
	// any damage to its journal.
	NoTrace = "no-trace"
	// Told: a daemon held on a damaged journal says so, naming the damaged
	// file and the command that recovers.
	Told = "operator-told"
)

// traceLine is a line only a Go crash prints: the daemon's own log lines
// are JSON objects.
var traceLine = regexp.MustCompile(`^(panic: |fatal error: |goroutine \d+ \[)`)

// CheckNoTrace looks at what the daemon of node wrote since a fault (log)
// and whether it still runs.
func CheckNoTrace(node string, log []byte, alive bool) []Violation {
	var out []Violation
	if !alive {
		out = append(out, Violation{Invariant: NoTrace, Subject: "node " + node, Safety: true,
			Evidence: "the daemon exited" + lastLines(log, 3)})
	}
	for _, line := range bytes.Split(log, []byte("\n")) {
		if traceLine.Match(line) {
			out = append(out, Violation{Invariant: NoTrace, Subject: "node " + node, Safety: true,
				Evidence: "the daemon printed a Go trace: " + string(line)})
			break
		}
	}
	return out
}

// CheckTold checks the state a daemon held on a damaged journal publishes:
// failed/hold, class corrupt, a reason naming the damaged file (its base
// name is enough: the daemon says it in full) and command.
func CheckTold(node string, st lifecycle.State, file, command string) []Violation {
	why := func(format string, args ...any) []Violation {
		return []Violation{{Invariant: Told, Subject: "node " + node, Safety: true, Evidence: fmt.Sprintf(format, args...)}}
	}
	if st.Name != lifecycle.Failed || st.Retry != lifecycle.RetryHold {
		return why("the daemon is %s, want failed/hold", st)
	}
	if st.LastError == nil || st.LastError.Class != lifecycle.CauseCorrupt {
		return why("the failure is %v, want class corrupt", st.LastError)
	}
	reason := st.LastError.Error()
	if !strings.Contains(reason, filepath.Base(file)) || !strings.Contains(reason, command) {
		return why("the failure does not name %s and `%s`: %s", filepath.Base(file), command, reason)
	}
	return nil
}

func lastLines(log []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(log)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "; its last lines: " + strings.Join(lines, " | ")
}
