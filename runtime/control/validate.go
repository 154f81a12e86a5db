package control

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/engenho/engenho/configs/stackfile"
)

// Bounds on argument values (SEC-3, SEC-4).
const (
	maxSlot        = stackfile.MaxReplicas
	maxLogLines    = 100_000
	maxEventsTail  = 100_000
	maxHistory     = 10_000
	maxPathLen     = 1024
	maxFileName    = 4096
	maxChaosParams = 64
	maxChaosValue  = 4096
)

// validator is implemented by every args type: it checks names, allow-lists
// and bounds before the handler sees the args.
type validator interface {
	validate() error
}

// badField is a bad_request naming the field: `args.stack: "Web" is not a
// valid name ([a-z0-9][a-z0-9-]{0,62})`.
func badField(field, format string, a ...any) *Error {
	return &Error{Code: CodeBadRequest, Message: "args." + field + ": " + fmt.Sprintf(format, a...), Details: map[string]string{"field": "args." + field}}
}

// quote shows a client's value in an error, cut short so a huge value does
// not flood the answer.
func quote(s string) string {
	const limit = 64
	if len(s) > limit {
		cut := limit
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "..."
	}
	return strconv.Quote(s)
}

func checkName(field, v string) error {
	if v == "" {
		return badField(field, "required")
	}
	if field == "service" {
		// Compose allows "_" in service names (stackfile.ValidServiceName).
		if !stackfile.ValidServiceName(v) {
			return badField(field, "%s is not a valid name ([a-z0-9][a-z0-9_-]{0,62})", quote(v))
		}
		return nil
	}
	if !stackfile.ValidName(v) {
		return badField(field, "%s is not a valid name ([a-z0-9][a-z0-9-]{0,62})", quote(v))
	}
	return nil
}

func checkService(stack, service string) error {
	if err := checkName("stack", stack); err != nil {
		return err
	}
	return checkName("service", service)
}

func checkRange(field string, v, lo, hi int) error {
	if v < lo || v > hi {
		return badField(field, "want %d..%d, got %d", lo, hi, v)
	}
	return nil
}

func (a StatusArgs) validate() error {
	if a.Stack != "" {
		if err := checkName("stack", a.Stack); err != nil {
			return err
		}
	}
	if a.Service != "" {
		if a.Stack == "" {
			return badField("service", "needs args.stack")
		}
		return checkName("service", a.Service)
	}
	return nil
}

func (a WhyArgs) validate() error {
	if err := checkService(a.Stack, a.Service); err != nil {
		return err
	}
	return checkRange("slot", a.Slot, 0, maxSlot)
}

func (a EventsArgs) validate() error { return checkRange("tail", a.Tail, 0, maxEventsTail) }

func (StopArgs) validate() error { return nil }

func (a HistoryArgs) validate() error {
	if a.Stack != "" {
		if err := checkName("stack", a.Stack); err != nil {
			return err
		}
	}
	return checkRange("limit", a.Limit, 0, maxHistory)
}

func (a RestartChildArgs) validate() error { return checkActorPath("path", a.Path) }

// checkActorPath accepts a path as `engenho tree` prints it:
// "root/stack:web/service:api/replica:1-abc". Segments are non-empty, made
// of [A-Za-z0-9._:-], never "." or "..".
func checkActorPath(field, p string) error {
	if p == "" {
		return badField(field, "required")
	}
	if len(p) > maxPathLen {
		return badField(field, "longer than %d bytes", maxPathLen)
	}
	for seg := range strings.SplitSeq(p, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return badField(field, "%s: empty, \".\" or \"..\" segment", quote(p))
		}
		for i := 0; i < len(seg); i++ {
			if !actorPathByte(seg[i]) {
				return badField(field, "%s: byte %q not allowed (want [A-Za-z0-9._:-] between slashes)", quote(p), seg[i])
			}
		}
	}
	return nil
}

func actorPathByte(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		c == '.' || c == '_' || c == ':' || c == '-'
}

func checkReinitWhat(v string) error {
	if !slices.Contains(ReinitTargets, v) {
		return badField("what", "%s: want one of %s", quote(v), strings.Join(ReinitTargets, ", "))
	}
	return nil
}

func (a EpochArgs) validate() error  { return checkReinitWhat(a.What) }
func (a ReinitArgs) validate() error { return checkReinitWhat(a.What) }

func (a ApplyArgs) validate() error {
	if len(a.Files) == 0 {
		return badField("files", "at least one stack file is required")
	}
	if a.DryRun && a.Wait {
		return badField("wait", "a dry run has no rollout to wait for")
	}
	for i, f := range a.Files {
		field := fmt.Sprintf("files[%d]", i)
		switch {
		case f.Name == "":
			return badField(field+".name", "required")
		case len(f.Name) > maxFileName:
			return badField(field+".name", "longer than %d bytes", maxFileName)
		case strings.ContainsRune(f.Name, 0):
			return badField(field+".name", "contains a NUL byte")
		case f.Content == "":
			return badField(field+".content", "%s is empty", quote(f.Name))
		case f.Dir != "" && !filepath.IsAbs(f.Dir):
			return badField(field+".dir", "%s is not an absolute path", quote(f.Dir))
		case strings.ContainsRune(f.Dir, 0):
			return badField(field+".dir", "contains a NUL byte")
		}
	}
	for _, p := range a.Profiles {
		if p == "" || strings.ContainsRune(p, 0) || len(p) > maxFileName {
			return badField("profiles", "a profile name is empty, too long or holds a NUL byte")
		}
	}
	return nil
}

func (a RemoveArgs) validate() error { return checkName("stack", a.Stack) }
func (a StackRef) validate() error   { return checkName("stack", a.Stack) }
func (a ServiceRef) validate() error { return checkService(a.Stack, a.Service) }

func (a ScaleArgs) validate() error {
	if err := checkService(a.Stack, a.Service); err != nil {
		return err
	}
	return checkRange("replicas", a.Replicas, 0, stackfile.MaxReplicas)
}

func (a LogsArgs) validate() error {
	if err := checkService(a.Stack, a.Service); err != nil {
		return err
	}
	if err := checkRange("slot", a.Slot, 0, maxSlot); err != nil {
		return err
	}
	return checkRange("lines", a.Lines, 0, maxLogLines)
}

func (a ChaosArgs) validate() error {
	if a.Kind == "" {
		return badField("kind", "required")
	}
	if len(a.Kind) > 64 || !chaosWord(a.Kind) {
		return badField("kind", "%s: want [a-z0-9._-], at most 64 bytes", quote(a.Kind))
	}
	if len(a.Target) > maxPathLen || strings.ContainsRune(a.Target, 0) || strings.Contains(a.Target, "..") {
		return badField("target", "%s: at most %d bytes, no NUL, no \"..\"", quote(a.Target), maxPathLen)
	}
	if len(a.Params) > maxChaosParams {
		return badField("params", "more than %d entries", maxChaosParams)
	}
	for k, v := range a.Params {
		if k == "" || len(k) > 64 || !chaosWord(k) {
			return badField("params", "key %s: want [a-z0-9._-], at most 64 bytes", quote(k))
		}
		if len(v) > maxChaosValue {
			return badField("params."+k, "longer than %d bytes", maxChaosValue)
		}
	}
	return nil
}

func chaosWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (a CancelArgs) validate() error {
	if a.ID == 0 {
		return badField("id", "required (the id of a request in flight on this connection)")
	}
	return nil
}

// noArgs is the args of ops that take none.
type noArgs struct{}

func (noArgs) validate() error { return nil }
