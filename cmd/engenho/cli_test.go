package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/goleak"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/control/controltest"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// daemonFake serves f on a fresh socket for the CLI to talk to.
func daemonFake(t *testing.T, f *controltest.Fake) string {
	t.Helper()
	t.Cleanup(func() {
		goleak.VerifyNone(t, goleak.IgnoreCurrent(), goleak.IgnoreTopFunction("os/signal.signal_recv"))
	})
	dir, err := os.MkdirTemp("", "cli")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "engenho.sock")
	srv, err := control.NewServer(control.Options{Path: path, Handler: f})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return path
}

// cli runs the engenho command line with args against the socket and
// returns its stdout, stderr (with the error main would print) and exit
// code.
func cli(t *testing.T, sock string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return cliContext(context.Background(), t, sock, stdin, &bytes.Buffer{}, args...)
}

func cliContext(ctx context.Context, t *testing.T, sock, stdin string, out io.Writer, args ...string) (string, string, int) {
	t.Helper()
	root := newRoot()
	var errb bytes.Buffer
	root.SetOut(out)
	root.SetErr(&errb)
	root.SetIn(strings.NewReader(stdin))
	if sock != "" {
		args = append([]string{"--socket", sock}, args...)
	}
	root.SetArgs(args)
	code := 0
	if err := root.ExecuteContext(ctx); err != nil {
		code = exitCode(err)
		errb.WriteString("engenho: " + err.Error() + "\n")
	}
	if b, ok := out.(*bytes.Buffer); ok {
		return b.String(), errb.String(), code
	}
	return "", errb.String(), code
}

// TestDMN12StatusThroughTheSocket: the table an operator sees is the
// formatted answer of the daemon; --json prints the answer itself.
func TestDMN12StatusThroughTheSocket(t *testing.T) {
	st := sampleStatus()
	st.Daemon.StartedAt = time.Time{} // no wall-clock age in the output
	f := &controltest.Fake{StatusResult: st}
	sock := daemonFake(t, f)
	out, errs, code := cli(t, sock, "", "status")
	if code != 0 {
		t.Fatalf("status: %d %s", code, errs)
	}
	same(t, "status", out, formatStatus(st, now))
	out, _, code = cli(t, sock, "", "--json", "status", "web/api")
	var back control.StatusResult
	if code != 0 || json.Unmarshal([]byte(out), &back) != nil || len(back.Services) != 2 || back.Daemon.PID != 4242 {
		t.Fatalf("status --json: %d %q", code, out)
	}
	if got := f.Calls()[1].Args; !reflect.DeepEqual(got, control.StatusArgs{Stack: "web", Service: "api"}) {
		t.Errorf("status filter sent as %+v", got)
	}
}

// TestDMN12ExitCodes: 0 ok, 1 when the daemon refuses or is not there, 2
// for usage errors, with a message that says what to do.
func TestDMN12ExitCodes(t *testing.T) {
	f := &controltest.Fake{LifecycleErr: &lifecycle.Refused{State: lifecycle.State{Name: lifecycle.Stopped}, Event: lifecycle.RetryRequested{}, Reason: "stopped: use start"}}
	sock := daemonFake(t, f)
	_, errs, code := cli(t, sock, "", "retry")
	if code != 1 || !strings.Contains(errs, "refused") || !strings.Contains(errs, "stopped: use start") {
		t.Errorf("refused retry: %d %q", code, errs)
	}
	_, errs, code = cli(t, filepath.Join(t.TempDir(), "none.sock"), "", "tree")
	if code != 1 || !strings.Contains(errs, "is the daemon running? no socket at") {
		t.Errorf("no daemon: %d %q", code, errs)
	}
	for _, args := range [][]string{{"frobnicate"}, {"scale", "web/api"}, {"scale", "web/api", "-1"}, {"why", "web"}, {"why", "web/api/x"},
		{"status", "--nope"}, {"reinit", "everything"}, {"apply", "--dry-run", "--wait", "x.yaml"}, {"logs", "Web/api"}, {"service", "stop"}} {
		if _, errs, code := cli(t, sock, "", args...); code != 2 {
			t.Errorf("%v: exit %d (%s), want 2", args, code, errs)
		}
	}
	if calls := f.Calls(); len(calls) != 1 {
		t.Errorf("usage errors reached the daemon: %+v", calls)
	}
}

// TestDMN12CommandsSendWhatTheySay: each subcommand sends its op with the
// arguments from the command line and prints the answer.
func TestDMN12CommandsSendWhatTheySay(t *testing.T) {
	running := lifecycle.State{Name: lifecycle.Running, Epoch: 4}
	f := &controltest.Fake{
		State:      running,
		TreeResult: control.TreeResult{Nodes: []supervise.Node{{Path: "root", State: "running"}}},
		Changes:    control.ChangeResult{Stack: "web", Deployment: "d-3", Changes: []stackfile.Change{{Service: "api", Action: stackfile.ActionRemove, FromRevision: "aaaaaaaaaaaa", FromReplicas: 2}}},
		LogChunks:  []control.LogChunk{{Slot: 1, Text: "one\n"}, {Slot: 2, Text: "two\n"}},
	}
	sock := daemonFake(t, f)
	ref := control.ServiceRef{Stack: "web", Service: "api"}
	cases := []struct {
		args []string
		op   control.Op
		sent any
		out  string // a piece of the output
	}{
		{[]string{"start"}, control.OpStart, nil, "start accepted: running, epoch 4"},
		{[]string{"stop", "--hold"}, control.OpStop, control.StopArgs{Hold: true}, "stop accepted"},
		{[]string{"restart"}, control.OpRestart, nil, "restart accepted"},
		{[]string{"retry"}, control.OpRetry, nil, "retry accepted"},
		{[]string{"exit"}, control.OpExit, nil, "exit accepted"},
		{[]string{"reconfigure"}, control.OpReconfigure, nil, "reconfigure accepted"},
		{[]string{"restart-child", "root/stack:web"}, control.OpRestartChild, control.RestartChildArgs{Path: "root/stack:web"}, "restarted root/stack:web"},
		{[]string{"tree"}, control.OpTree, nil, "ACTOR"},
		{[]string{"why", "web/api/2"}, control.OpWhy, control.WhyArgs{Stack: "web", Service: "api", Slot: 2}, "web/api"},
		{[]string{"remove", "web", "--volumes"}, control.OpRemove, control.RemoveArgs{Stack: "web", Volumes: true}, "removing stack web (deployment d-3):\nSERVICE"},
		{[]string{"scale", "web/api", "3"}, control.OpScale, control.ScaleArgs{Stack: "web", Service: "api", Replicas: 3}, "web/api: 1 -> 3 replicas"},
		{[]string{"rollback", "web"}, control.OpRollback, control.StackRef{Stack: "web"}, "rolling back stack web"},
		{[]string{"redeploy", "web/api"}, control.OpRedeploy, ref, "redeploying web/api"},
		{[]string{"service", "stop", "web/api"}, control.OpServiceStop, ref, "web/api: stopped"},
		{[]string{"service", "start", "web/api"}, control.OpServiceStart, ref, "web/api: started"},
		{[]string{"service", "retry", "web/api"}, control.OpServiceRetry, ref, "web/api: backoff cleared"},
		{[]string{"logs", "web/api", "-n", "5"}, control.OpLogs, control.LogsArgs{Stack: "web", Service: "api", Lines: 5}, "[1] one\n[2] two\n"},
		{[]string{"logs", "web/api", "--slot", "2"}, control.OpLogs, control.LogsArgs{Stack: "web", Service: "api", Slot: 2, Lines: 100}, "two\n"},
	}
	for i, tc := range cases {
		out, errs, code := cli(t, sock, "", tc.args...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", tc.args, code, errs)
			continue
		}
		if !strings.Contains(out, tc.out) {
			t.Errorf("%v: output %q lacks %q", tc.args, out, tc.out)
		}
		calls := f.Calls()
		if len(calls) != i+1 || calls[i].Op != tc.op || !reflect.DeepEqual(calls[i].Args, tc.sent) {
			t.Errorf("%v: daemon got %+v, want %s %+v", tc.args, calls[len(calls)-1], tc.op, tc.sent)
		}
	}
}

// TestSVC4ApplyDryRunSendsTheFiles: apply reads each file, sends its name
// and content, and prints the plan the daemon computed.
func TestSVC4ApplyDryRunSendsTheFiles(t *testing.T) {
	f := &controltest.Fake{ApplyResult: control.ApplyResult{Stacks: []control.StackPlan{{Stack: "web", Changes: []stackfile.Change{
		{Service: "api", Action: stackfile.ActionCreate, ToRevision: "cccccccccccc", ToReplicas: 2}}}}}}
	sock := daemonFake(t, f)
	file := filepath.Join(t.TempDir(), "web.yaml")
	os.WriteFile(file, []byte("services:\n  api:\n    command: [sleep, inf]\n"), 0o600)
	out, errs, code := cli(t, sock, "", "apply", file, "--dry-run")
	if code != 0 {
		t.Fatalf("apply: %d %s", code, errs)
	}
	same(t, "dry run", out, "stack web (dry run, nothing changed):\nSERVICE  ACTION  REVISION      REPLICAS  CHANGED\napi      create  cccccccccccc  2         -\n")
	sent := f.Calls()[0].Args.(control.ApplyArgs)
	if !sent.DryRun || len(sent.Files) != 1 || sent.Files[0].Name != file || !strings.Contains(sent.Files[0].Content, "sleep") {
		t.Errorf("apply sent %+v", sent)
	}
	if _, errs, code := cli(t, sock, "", "apply", filepath.Join(t.TempDir(), "missing.yaml")); code != 1 || !strings.Contains(errs, "no such file") {
		t.Errorf("missing file: %d %s", code, errs)
	}
}

// TestSVC5ApplyWaitExitsNonZeroOnFailure.
func TestSVC5ApplyWaitExitsNonZeroOnFailure(t *testing.T) {
	failed := messages.ServiceStatus{Stack: "web", Service: "api", State: messages.ServicePaused, Message: "never healthy", FailureOutput: "boom\n"}
	f := &controltest.Fake{
		Progress: []control.ApplyProgress{{Planned: []control.StackPlan{{Stack: "web"}}}, {Service: &failed}},
		ApplyResult: control.ApplyResult{Stacks: []control.StackPlan{{Stack: "web"}}, Outcome: control.OutcomeFailed, Failed: []messages.ServiceStatus{failed},
			Verdicts: []control.ServiceVerdict{{Stack: "web", Service: "api", Outcome: control.OutcomeFailed, Reason: "paused: never healthy"}}},
	}
	sock := daemonFake(t, f)
	file := filepath.Join(t.TempDir(), "web.yaml")
	os.WriteFile(file, []byte("x"), 0o600)
	out, errs, code := cli(t, sock, "", "apply", "--wait", file)
	if code != 1 || !strings.Contains(errs, "rollout failed: web/api") || !strings.Contains(out, "web/api  paused") || !strings.Contains(out, "  web/api: paused: never healthy\n    | boom") {
		t.Fatalf("failed wait: %d\n%s\n%s", code, out, errs)
	}
	f.ApplyResult.Outcome, f.ApplyResult.Failed = control.OutcomeConverged, nil
	f.ApplyResult.Verdicts[0].Outcome = control.OutcomeConverged
	if out, errs, code := cli(t, sock, "", "apply", "--wait", file); code != 0 || !strings.Contains(out, "converged") {
		t.Fatalf("converged wait: %d\n%s\n%s", code, out, errs)
	}
}

// TestDMN14ReinitConfirmsAndCarriesTheEpoch: reinit shows what will move,
// asks on the terminal (or takes --yes), and sends the epoch it read; no
// confirmation, no terminal, or a daemon that does not allow it: nothing is
// sent.
func TestDMN14ReinitConfirmsAndCarriesTheEpoch(t *testing.T) {
	f := &controltest.Fake{
		EpochResult:  control.EpochResult{State: lifecycle.State{Name: lifecycle.Stopped, Epoch: 7}, Epoch: 7, Allowed: true, Moves: []string{"/d/journal"}, Attic: "/d/attic"},
		ReinitResult: control.ReinitResult{What: "journal", Moved: []string{"/d/attic/20250301T120000.000Z/journal"}},
	}
	sock := daemonFake(t, f)
	reinits := func() (n int, last control.ReinitArgs) {
		for _, c := range f.Calls() {
			if c.Op == control.OpReinit {
				n++
				last = c.Args.(control.ReinitArgs)
			}
		}
		return n, last
	}
	out, errs, code := cli(t, sock, "", "reinit", "journal", "--yes")
	if code != 0 {
		t.Fatalf("reinit --yes: %d %s", code, errs)
	}
	same(t, "reinit", out, `reinit journal: the daemon is stopped (stop epoch 7)
will move to /d/attic (nothing is deleted):
  /d/journal
reinit journal done; moved aside:
  /d/attic/20250301T120000.000Z/journal
`)
	if n, last := reinits(); n != 1 || last != (control.ReinitArgs{What: "journal", Epoch: 7}) {
		t.Fatalf("reinit sent %d, %+v", n, last)
	}

	if _, errs, code := cli(t, sock, "", "reinit", "journal"); code != 2 || !strings.Contains(errs, "pass --yes") {
		t.Errorf("no terminal, no --yes: %d %s", code, errs)
	}
	isTerminal = func(io.Reader) bool { return true }
	t.Cleanup(func() { isTerminal = stdinTerminal })
	if _, errs, code := cli(t, sock, "no\n", "reinit", "journal"); code != 1 || !strings.Contains(errs, "not confirmed") {
		t.Errorf("answered no: %d %s", code, errs)
	}
	if _, errs, code := cli(t, sock, "yes\n", "reinit", "identity"); code != 0 || !strings.Contains(errs, `Type "yes"`) {
		t.Errorf("answered yes: %d %s", code, errs)
	}
	if n, last := reinits(); n != 2 || last.What != "identity" {
		t.Errorf("after the prompts: %d reinits, last %+v", n, last)
	}

	f.EpochResult.Allowed, f.EpochResult.Reason = false, "the runtime is running: stop it first"
	if _, errs, code := cli(t, sock, "", "reinit", "journal", "--yes"); code != 1 || !strings.Contains(errs, "stop it first") {
		t.Errorf("not allowed: %d %s", code, errs)
	}
	if n, _ := reinits(); n != 2 {
		t.Errorf("a refused reinit was sent")
	}
}

// TestSVC20EventsFollowUntilInterrupted: events -f prints each event as it
// comes and ends cleanly (exit 0) when interrupted.
func TestSVC20EventsFollowUntilInterrupted(t *testing.T) {
	f := &controltest.Fake{
		EventLog: []messages.Event{{Seq: 1, Kind: "daemon.booted", Level: "info", Message: "up"}, {Seq: 2, Kind: "deploy.succeeded", Level: "info", Message: "web"}},
		Feed:     make(chan messages.Event),
	}
	sock := daemonFake(t, f)
	out, _, code := cli(t, sock, "", "events", "--since", "2")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "#2 ") {
		t.Fatalf("events --since 2: %d %q", code, out)
	}
	if got := f.Calls()[0].Args; got != (control.EventsArgs{Since: 1}) {
		t.Errorf("--since 2 sent as %+v, want since 1 (the protocol's since is the last seen)", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	w := &lineWatch{lines: make(chan string, 10)}
	done := make(chan int)
	go func() {
		_, _, code := cliContext(ctx, t, sock, "", w, "events", "-f", "--json")
		done <- code
	}()
	<-w.lines // #1
	<-w.lines // #2
	f.Feed <- messages.Event{Seq: 3, Kind: "health.unhealthy", Level: "warn", Message: "web/api"}
	var e messages.Event
	if err := json.Unmarshal([]byte(<-w.lines), &e); err != nil || e.Seq != 3 {
		t.Fatalf("followed event: %+v %v", e, err)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("interrupted follow exit %d, want 0", code)
	}
}

// SVC-20: `events --since N` starts at event N, N included (docs/control.md);
// --since 0 and 1 show all that are kept. A multi-line message is one
// escaped line in the table and the same string in --json.
func TestSVC20EventsSinceIncludesN(t *testing.T) {
	var log []messages.Event
	for i := uint64(1); i <= 5; i++ {
		log = append(log, messages.Event{Seq: i, Kind: "x.y", Level: "info", Message: fmt.Sprintf("event %d", i)})
	}
	log[3].Message = "probe said\nline two"
	sock := daemonFake(t, &controltest.Fake{EventLog: log})
	for since, want := range map[string][]uint64{"3": {3, 4, 5}, "5": {5}, "6": nil, "1": {1, 2, 3, 4, 5}, "0": {1, 2, 3, 4, 5}} {
		out, errs, code := cli(t, sock, "", "--json", "events", "--since", since)
		if code != 0 {
			t.Fatalf("--since %s: %d %s", since, code, errs)
		}
		var got []uint64
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var e messages.Event
			if line != "" && json.Unmarshal([]byte(line), &e) == nil && e.Kind != "" {
				got = append(got, e.Seq)
				if e.Seq == 4 && e.Message != "probe said\nline two" {
					t.Errorf("--json changed the message: %q", e.Message)
				}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("--since %s: events %v, want %v", since, got, want)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var res control.EventsResult
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil || res.Last != 5 || !strings.Contains(lines[len(lines)-1], `"last"`) {
			t.Errorf("--since %s: the last line %q is not the stream's result", since, lines[len(lines)-1])
		}
	}
	out, _, _ := cli(t, sock, "", "events", "--since", "4")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasSuffix(lines[0], `probe said\nline two`) {
		t.Errorf("human events: %q", out)
	}
}

// lineWatch hands each written line to a channel.
type lineWatch struct {
	mu    sync.Mutex
	buf   string
	lines chan string
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf += string(p)
	for {
		i := strings.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.lines <- w.buf[:i]
		w.buf = w.buf[i+1:]
	}
}

// TestDMN11SocketPathDefaults: --socket, then $ENGENHO_SOCKET, then
// --data-dir/control/engenho.sock, then /var/lib/engenho/...
func TestDMN11SocketPathDefaults(t *testing.T) {
	path := func(env string, args ...string) string {
		t.Setenv(socketEnv, env)
		root := newRoot()
		var got string
		root.SetArgs(args)
		root.SetOut(io.Discard)
		for _, c := range root.Commands() {
			if c.Name() == "tree" {
				c.RunE = func(cmd *cobra.Command, _ []string) error { got = socketPath(cmd); return nil }
			}
		}
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	same(t, "default", path("", "tree"), "/var/lib/engenho/control/engenho.sock")
	same(t, "data dir", path("", "--data-dir", "/srv/e", "tree"), "/srv/e/control/engenho.sock")
	same(t, "env", path("/run/e.sock", "tree"), "/run/e.sock")
	same(t, "data dir over env", path("/run/e.sock", "--data-dir", "/srv/e", "tree"), "/srv/e/control/engenho.sock")
	same(t, "flag", path("/run/e.sock", "tree", "--socket", "/tmp/x.sock"), "/tmp/x.sock")
}

// DMN-16: reconfigure says what the reload did. A refused config is exit 1
// with every error the daemon listed, never "accepted"; a reload that
// applied says so, key by key and stack by stack; outside running the
// lifecycle's answer is shown as accepted.
func TestDMN16ReconfigureSaysWhatHappened(t *testing.T) {
	running := lifecycle.State{Name: lifecycle.Running, Epoch: 2}
	var answer func() (control.ReconfigureResult, error)
	f := &controltest.Fake{ReconfigureFunc: func() (control.ReconfigureResult, error) { return answer() }}
	sock := daemonFake(t, f)

	answer = func() (control.ReconfigureResult, error) {
		return control.ReconfigureResult{}, control.Errorf(control.CodeInvalid,
			"config rejected, the daemon keeps running on the config it has:\n  /etc/engenho/web.yaml:5: services.api.bogus: unknown key\n  /etc/engenho/db.yaml:2: name: want a stack name")
	}
	out, errs, code := cli(t, sock, "", "reconfigure")
	if code != 1 || strings.Contains(out+errs, "accepted") || !strings.Contains(errs, "web.yaml:5: services.api.bogus: unknown key") || !strings.Contains(errs, "db.yaml:2") {
		t.Errorf("rejected: exit %d\n%s%s", code, out, errs)
	}

	answer = func() (control.ReconfigureResult, error) {
		return control.ReconfigureResult{State: running, Reloaded: true, Applied: []string{"log.level", "stack web: api update"}, NeedsRestart: []string{"edge.listen"}}, nil
	}
	out, errs, code = cli(t, sock, "", "reconfigure")
	same(t, "reloaded", out, "config reloaded: running, epoch 2\napplied in place:\n  log.level\n  stack web: api update\nneeds a restart: edge.listen\n")
	if code != 0 {
		t.Errorf("reloaded: exit %d %s", code, errs)
	}

	answer = func() (control.ReconfigureResult, error) {
		return control.ReconfigureResult{State: running, Reloaded: true}, nil
	}
	if out, _, _ := cli(t, sock, "", "reconfigure"); !strings.Contains(out, "nothing to apply in place") {
		t.Errorf("nothing changed: %q", out)
	}

	answer = func() (control.ReconfigureResult, error) {
		return control.ReconfigureResult{State: lifecycle.State{Name: lifecycle.Booting, Phase: lifecycle.PhaseResolveConfig}}, nil
	}
	if out, _, code := cli(t, sock, "", "reconfigure"); code != 0 || !strings.Contains(out, "reconfigure accepted: booting") {
		t.Errorf("booting: %d %q", code, out)
	}
}

// SVC-5: an apply that changes nothing says so; only one that recorded a
// deployment says it is rolling out.
func TestSVC5ApplyOfTheSameFileSaysNothingChanged(t *testing.T) {
	file := filepath.Join(t.TempDir(), "web.yaml")
	os.WriteFile(file, []byte("services:\n  api:\n    command: [sleep, inf]\n"), 0o600)
	unchanged := &controltest.Fake{ApplyResult: control.ApplyResult{Stacks: []control.StackPlan{{Stack: "web",
		Changes: []stackfile.Change{{Service: "api", Action: stackfile.ActionUnchanged}}}}}}
	out, errs, code := cli(t, daemonFake(t, unchanged), "", "apply", file)
	if code != 0 || !strings.Contains(out, "nothing changed: nothing to roll out") || strings.Contains(out, "rolling out") {
		t.Errorf("apply of an unchanged stack: %d %s\n%s", code, errs, out)
	}
	changed := &controltest.Fake{ApplyResult: control.ApplyResult{Stacks: []control.StackPlan{{Stack: "web", Deployment: "2",
		Changes: []stackfile.Change{{Service: "api", Action: stackfile.ActionUpdate}}}}}}
	out, errs, code = cli(t, daemonFake(t, changed), "", "apply", file)
	if code != 0 || !strings.Contains(out, "rolling out in the background") {
		t.Errorf("apply of a changed stack: %d %s\n%s", code, errs, out)
	}
}

// SVC-5: Ctrl-C during apply --wait ends the wait, not the rollout, and
// says so (it printed a bare "context canceled").
func TestSVC5ApplyWaitInterruptedSaysTheRolloutGoesOn(t *testing.T) {
	gone := make(chan struct{})
	f := &controltest.Fake{ApplyFunc: func(_ control.ApplyArgs, progress func(control.ApplyProgress) error) (control.ApplyResult, error) {
		defer close(gone)
		for {
			if err := progress(control.ApplyProgress{}); err != nil {
				return control.ApplyResult{}, err // the client went away
			}
			time.Sleep(5 * time.Millisecond)
		}
	}}
	sock := daemonFake(t, f)
	file := filepath.Join(t.TempDir(), "web.yaml")
	os.WriteFile(file, []byte("services:\n  api:\n    command: [sleep, inf]\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, errs, code := cliContext(ctx, t, sock, "", io.Discard, "apply", "--wait", file)
	if code != 1 || !strings.Contains(errs, "interrupted") || !strings.Contains(errs, "goes on") || strings.Contains(errs, "context canceled") {
		t.Errorf("interrupted apply --wait: exit %d, %q", code, errs)
	}
	<-gone
}

// slowYes answers "yes" on its first read after moving the clock past the
// socket's idle timeout: an operator who read the plan for a long while.
type slowYes struct {
	clk  *clock.Fake
	past time.Duration
	done bool
}

func (r *slowYes) Read(p []byte) (int, error) {
	if r.done {
		return 0, io.EOF
	}
	r.done = true
	r.clk.Advance(r.past)
	return copy(p, "yes\n"), nil
}

// DMN-14: a reinit confirmed after longer than the socket's idle timeout
// still happens: the request goes on a new connection (the epoch guards
// it), where the idle timeout cut it off before.
func TestDMN14ReinitConfirmedAfterTheIdleTimeout(t *testing.T) {
	f := &controltest.Fake{
		EpochResult:  control.EpochResult{State: lifecycle.State{Name: lifecycle.Stopped, Epoch: 7}, Epoch: 7, Allowed: true, Moves: []string{"/d/journal"}, Attic: "/d/attic"},
		ReinitResult: control.ReinitResult{What: "journal", Moved: []string{"/d/attic/x/journal"}},
	}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	sock := filepath.Join(dir, "engenho.sock")
	srv, err := control.NewServer(control.Options{Path: sock, Handler: f, IdleTimeout: time.Minute, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	was := isTerminal
	isTerminal = func(io.Reader) bool { return true }
	t.Cleanup(func() { isTerminal = was })

	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetIn(&slowYes{clk: clk, past: 2 * time.Minute})
	root.SetArgs([]string{"--socket", sock, "reinit", "journal"})
	if err := root.Execute(); err != nil {
		t.Fatalf("reinit confirmed after the idle timeout: %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "reinit journal done") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// DMN-12: a request larger than the client's old 1 MiB default reaches a
// daemon whose control.max_request allows it; the daemon's limit is the
// one that counts.
func TestDMN12TheDaemonsMaxRequestCounts(t *testing.T) {
	f := &controltest.Fake{ApplyResult: control.ApplyResult{Stacks: []control.StackPlan{{Stack: "web"}}}}
	dir := t.TempDir()
	sock := filepath.Join(dir, "engenho.sock")
	srv, err := control.NewServer(control.Options{Path: sock, Handler: f, MaxRequest: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	file := filepath.Join(dir, "web.yaml")
	big := "services:\n  api:\n    command: [sleep, inf]\n# " + strings.Repeat("x", 1536<<10) + "\n"
	os.WriteFile(file, []byte(big), 0o600)
	if _, errs, code := cli(t, sock, "", "apply", file); code != 0 {
		t.Fatalf("a 1.5 MiB apply to a daemon allowing 4 MiB: exit %d %s", code, errs)
	}
}
