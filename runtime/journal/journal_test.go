package journal

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// DMN-10: a second Open of a directory in use fails at once with a typed
// error naming the holder's pid.
func TestOpenLockedDirFailsWithHolderPID(t *testing.T) {
	dir := t.TempDir()
	openTest(t, dir, nil)
	_, err := Open(Options{Dir: dir})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: got %v, want ErrLocked", err)
	}
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() || le.Dir != dir {
		t.Fatalf("locked error %#v, want pid %d dir %s", le, os.Getpid(), dir)
	}
}

// DMN-10: Open reports how the previous process left the journal: first
// open, then clean after Close. (Unclean after SIGKILL is proven in
// crash_test.go.)
func TestPreviousCloseFirstThenClean(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(Options{Dir: dir})
	noErr(t, err)
	if got := j.PreviousClose().State; got != FirstOpen {
		t.Fatalf("first open: %s", got)
	}
	noErr(t, j.Close())
	noErr(t, j.Close()) // idempotent
	j2, _ := openTest(t, dir, nil)
	if got := j2.PreviousClose(); got.State != CleanClose || got.PID != 0 {
		t.Fatalf("after close: %+v", got)
	}
}

func TestOpenNeedsDir(t *testing.T) {
	if _, err := Open(Options{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
}

func TestCallsAfterCloseReturnErrClosed(t *testing.T) {
	j, err := Open(Options{Dir: t.TempDir()})
	noErr(t, err)
	noErr(t, j.Close())
	checks := map[string]error{
		"StopService": j.StopService("web", "api"),
		"Walk":        j.Walk("", func(Record) error { return nil }),
		"Emit":        j.Emit(evt("x")),
	}
	_, checks["Append"] = j.Append(evt("x"))
	_, checks["PruneEvents"] = j.PruneEvents()
	_, _, checks["Stack"] = j.Stack("web")
	checks["Subscribe"] = j.Subscribe(0).Err()
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after close: %v, want ErrClosed", name, err)
		}
	}
}

// Walk lists every record with its full key, for `engenho why` and tests;
// the key layout is namespaced by type under a version prefix.
func TestWalkListsEveryRecordByVersionedKey(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	noErr(t, j.StopService("web", "api"))
	must(j.RecordDeployment("web", Deployment{Definition: json.RawMessage(`{"a":1}`), Source: "socket"}))
	must(j.Append(evt("x")))
	must(j.RecordBoot(BootAttempt{}))
	var keys []string
	noErr(t, j.Walk("", func(r Record) error {
		if !json.Valid(r.Value) {
			t.Errorf("%s: value is not JSON: %q", r.Key, r.Value)
		}
		keys = append(keys, r.Key)
		return nil
	}))
	want := []string{
		"v1/boot/00000000000000000001",
		"v1/deploy-seq/web",
		"v1/desired/web",
		"v1/event/00000000000000000001",
		"v1/meta/event-seq",
		"v1/stopped/web/api",
	}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Fatalf("keys\n got %v\nwant %v", keys, want)
	}
	var only []string
	noErr(t, j.Walk(PrefixStopped, func(r Record) error { only = append(only, r.Key); return nil }))
	if len(only) != 1 || only[0] != "v1/stopped/web/api" {
		t.Fatalf("prefix walk: %v", only)
	}
}

// SVC-1, SEC-3: a service name may hold "_" (Compose allows it); a stack
// name may not, and neither may hold the key separator or a dot.
func TestServiceNamesMayHoldUnderscore(t *testing.T) {
	j, _ := openTest(t, t.TempDir(), nil)
	cases := []struct {
		stack, service string
		ok             bool
	}{
		{"web", "my_api", true},
		{"web", "api", true},
		{"my_web", "api", false},
		{"web", "a/b", false},
		{"web", "..", false},
		{"web", "_api", false},
		{"web", "Api", false},
	}
	for _, tc := range cases {
		err := j.StopService(tc.stack, tc.service)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("StopService(%q, %q) = %v, want ok %v", tc.stack, tc.service, err, tc.ok)
		}
	}
	_, err := j.RecordDeployment("web", Deployment{Definition: json.RawMessage(`{"a":1}`), Source: "socket", Revisions: map[string]string{"my_api": "abc123"}})
	noErr(t, err)
}
