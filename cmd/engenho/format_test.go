package main

import (
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/lifecycle"
)

var now = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func sampleStatus() control.StatusResult {
	return control.StatusResult{
		Daemon: control.DaemonStatus{Lifecycle: lifecycle.State{Name: lifecycle.Running, Epoch: 3, Attempt: 1}, Node: control.NodeIdentity{Name: "edge-1", ID: "7f3a9c"},
			PID: 4242, StartedAt: now.Add(-(2*time.Hour + 5*time.Minute)), PreviousRun: "clean"},
		Stacks: []messages.StackStatus{{Stack: "web", Converged: false, Services: []string{"api", "worker"}}},
		Services: []messages.ServiceStatus{
			{Stack: "web", Service: "api", State: messages.ServiceConverged, Revision: "3f9a2c1b7d4e99", Desired: 2, Running: 2, Healthy: 2,
				FailureOutput: "old failure, not shown once converged",
				Replicas: []messages.ReplicaStatus{
					{Slot: 1, Revision: "3f9a2c1b7d4e99", Phase: "serving", Health: "healthy", InRotation: true, Addresses: map[int]string{8080: "127.0.0.1:31001"}, LastProbe: "HTTP 200 OK",
						Usage: &messages.ReplicaUsage{CPUCores: ptr(0.25), MemoryBytes: 64 << 20, Pids: 3}},
					{Slot: 2, Revision: "3f9a2c1b7d4e99", Phase: "serving", Health: "healthy", InRotation: true, Restarts: 2, Addresses: map[int]string{9090: "127.0.0.1:32002", 8080: "127.0.0.1:31002"}, LastProbe: "HTTP 200 OK\nbody: a very long probe output that goes on and on and on",
						Usage: &messages.ReplicaUsage{MemoryBytes: 1536 << 10, Pids: 1}},
				},
				Ports: []messages.PortStatus{{Listen: "0.0.0.0:8080", Target: 8080, Backends: []string{"a", "b"}, Accepted: 1200, Active: 4, Rate: 12.5}}},
			{Stack: "web", Service: "worker", State: messages.ServiceFailing, Message: "slot 1: exited with code 1", Revision: "9c8b7a6d5e4f", Desired: 1,
				FailureOutput: "starting worker\npanic: no DB_URL\n",
				Rollout:       &messages.RolloutStatus{Revision: "9c8b7a6d5e4f", From: "1a2b3c4d5e6f", Order: "stop-first", Slots: []messages.SlotStatus{{Slot: 1, State: "updating"}}},
				Replicas:      []messages.ReplicaStatus{{Slot: 1, Revision: "9c8b7a6d5e4f", Phase: "down", Health: "none", Restarts: 5, LastError: "exited with code 1"}}},
		},
	}
}

func ptr[T any](v T) *T { return &v }

func same(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Errorf("%s:\n--- got ---\n%s--- want ---\n%s", what, got, want)
	}
}

// TestSVC19StatusTable: the daemon line, one row per service, then per
// service its replicas (slot, revision, phase, health, address, rotation,
// restarts, last probe), its ports (SVC-22), its rollout slot by slot, and,
// while not converged, its failure output (SVC-21).
func TestSVC19StatusTable(t *testing.T) {
	same(t, "status", formatStatus(sampleStatus(), now), `daemon   running, epoch 3
node     edge-1 (7f3a9c)
process  pid 4242, up 2h5m, previous run clean
stacks   1, 0 converged

SERVICE     STATE      DESIRED  RUNNING  HEALTHY  REVISION      MESSAGE
web/api     converged  2        2        2        3f9a2c1b7d4e  -
web/worker  failing    1        0        0        9c8b7a6d5e4f  slot 1: exited with code 1

web/api
  SLOT  REVISION      PHASE    HEALTH   ADDRESS                                    IN ROTATION  RESTARTS  CPU   MEM      PIDS  LAST PROBE
  1     3f9a2c1b7d4e  serving  healthy  127.0.0.1:31001                            yes          0         0.25  64 MiB   3     HTTP 200 OK
  2     3f9a2c1b7d4e  serving  healthy  8080=127.0.0.1:31002,9090=127.0.0.1:32002  yes          2         -     1.5 MiB  1     HTTP 200 OK body: a very long probe o...
  PORT          TARGET  BACKENDS  ACCEPTED  ACTIVE  RATE
  0.0.0.0:8080  8080    2         1200      4       12.5/s

web/worker
  SLOT  REVISION      PHASE  HEALTH  ADDRESS  IN ROTATION  RESTARTS  CPU  MEM  PIDS  LAST PROBE
  1     9c8b7a6d5e4f  down   none    -        no           5         -    -    -     error: exited with code 1
  rollout to 9c8b7a6d5e4f from 1a2b3c4d5e6f (stop-first): slot 1 updating
  output of the last replica that failed:
    | starting worker
    | panic: no DB_URL
`)
}

// TestDMN13StatusOfAStoppedDaemon: no services, the state line says why.
func TestDMN13StatusOfAStoppedDaemon(t *testing.T) {
	res := control.StatusResult{Daemon: control.DaemonStatus{PID: 7, Lifecycle: lifecycle.State{Name: lifecycle.Stopped, Hold: true, Epoch: 2}}}
	same(t, "stopped", formatStatus(res, now), `daemon   stopped+hold, epoch 2
node     -
process  pid 7
stacks   0, 0 converged

no services
`)
}

func TestDMN6LifecycleLine(t *testing.T) {
	cases := []struct {
		s    lifecycle.State
		want string
	}{
		{lifecycle.State{Name: lifecycle.Running, Epoch: 3}, "running, epoch 3"},
		{lifecycle.State{Name: lifecycle.Booting, Phase: lifecycle.PhaseAdopt, Attempt: 2, Epoch: 3}, "booting/adopt, epoch 3, attempt 2"},
		{lifecycle.State{Name: lifecycle.Failed, Retry: lifecycle.RetryBackoff, RetryDelay: 4 * time.Second, Attempt: 3, Epoch: 2,
			LastError: &lifecycle.Failure{Phase: lifecycle.PhaseOpenJournal, Class: lifecycle.CauseTransient, Reasons: []string{"journal locked"}}},
			"failed/backoff(4s), epoch 2, attempt 3: open_journal: transient: journal locked"},
		{lifecycle.State{Name: lifecycle.Draining, DrainStep: lifecycle.DrainTree, Then: lifecycle.TargetStopped, Epoch: 1}, "draining/tree>stopped, epoch 1"},
	}
	for _, tc := range cases {
		same(t, tc.s.String(), lifecycleLine(tc.s), tc.want)
	}
}

// TestSUP1TreeTable: each actor indented under its parent (a sibling whose
// name extends another's sorts after that one's children), with state,
// restarts, age, detail and the path restart-child takes.
func TestSUP1TreeTable(t *testing.T) {
	nodes := []supervise.Node{
		{Path: "root", State: "running", Since: now.Add(-2 * time.Hour)},
		{Path: "root/stack:web-2", State: "running", Since: now.Add(-time.Hour)},
		{Path: "root/stack:web", State: "running", Since: now.Add(-2 * time.Hour)},
		{Path: "root/stack:web/service:api", State: "running", Restarts: 1, Detail: "3/3 healthy", Since: now.Add(-5 * time.Minute)},
		{Path: "root/stack:web/service:api/replica:1-a1", State: "restarting", Detail: "backoff 8s", Since: now.Add(-5 * time.Second)},
		{Path: "root/stack:web/service:db", State: "restarting", Restarts: 4, Detail: "waiting out its backoff: service:db ended (panic), failure 4",
			Since: now.Add(-10 * time.Second), NextAttempt: now.Add(50 * time.Second)},
	}
	same(t, "tree", formatTree(nodes, now), `ACTOR               STATE       RESTARTS  SINCE  DETAIL                                                        PATH
root                running     0         2h     -                                                             root
  stack:web         running     0         2h     -                                                             root/stack:web
    service:api     running     1         5m     3/3 healthy                                                   root/stack:web/service:api
      replica:1-a1  restarting  0         5s     backoff 8s                                                    root/stack:web/service:api/replica:1-a1
    service:db      restarting  4         10s    next attempt in 50s; waiting out its backoff: service:db ...  root/stack:web/service:db
  stack:web-2       running     0         1h     -                                                             root/stack:web-2
`)
	same(t, "empty tree", formatTree(nil, now), "no actors (the runtime is not running)\n")
}

// TestSUP18WhyTable: per slot the ledger (failures, pending attempt, stable
// since, next attempt, last reason) beside the replica's phase and health,
// then each slot's last error in full.
func TestSUP18WhyTable(t *testing.T) {
	res := control.WhyResult{Stack: "web", Service: "api", State: messages.ServiceFailing, Message: "slot 2 keeps failing",
		Slots: []control.WhySlot{
			{Slot: 1, Phase: "serving", Health: "healthy", HasLedger: true, Ledger: messages.Ledger{StableSince: now.Add(-5 * time.Minute)}},
			{Slot: 2, Phase: "down", Health: "unhealthy", Restarts: 3, LastError: "start: exit status 1", HasLedger: true,
				Ledger: messages.Ledger{Failures: 3, LastReason: "exited with code 1", Unconfirmed: true, NextAttempt: now.Add(8 * time.Second)}},
			{Slot: 3, Phase: "creating"},
		}}
	same(t, "why", formatWhy(res, now), `web/api  failing: slot 2 keeps failing

SLOT  PHASE     HEALTH     RESTARTS  FAILURES  PENDING  STABLE SINCE  NEXT ATTEMPT  LAST REASON
1     serving   healthy    0         0         no       5m ago        -             -
2     down      unhealthy  3         3         yes      -             in 8s         exited with code 1
3     creating  -          0         0         no       -             -             -

slot 2 last error: start: exit status 1
`)
}

// TestSUP21WhyWaitingHost: a hibernating service whose host actor waits
// out its backoff: the host's state and next attempt, then each waiting
// actor with its next attempt and why.
func TestSUP21WhyWaitingHost(t *testing.T) {
	res := control.WhyResult{Stack: "web", Service: "notes", State: "restarting", Message: "host actor ended (panic: boom), failure 4",
		Host: &messages.HostStatus{Host: "notes.localhost", State: messages.HostRestarting, Since: now.Add(-10 * time.Second), NextAttempt: now.Add(50 * time.Second)},
		Waiting: []supervise.Node{{Path: "root/activator/host:notes.localhost", State: "restarting", NextAttempt: now.Add(50 * time.Second),
			Detail: "waiting out its backoff: host:notes.localhost ended (panic), failure 4"}}}
	same(t, "why", formatWhy(res, now), `web/notes  restarting: host actor ended (panic: boom), failure 4
host notes.localhost  restarting since 10s ago, next attempt in 50s
actor root/activator/host:notes.localhost restarting, next attempt in 50s: waiting out its backoff: host:notes.localhost ended (panic), failure 4
`)
}

// TestSVC4DryRunTable: per service create, update, scale, remove,
// unchanged, as the daemon computed them.
func TestSVC4DryRunTable(t *testing.T) {
	res := control.ApplyResult{DryRun: true, Stacks: []control.StackPlan{{Stack: "web", Changes: []stackfile.Change{
		{Service: "api", Action: stackfile.ActionUpdate, FromRevision: "3f9a2c1b7d4e", ToRevision: "7b1d4e09aa31", FromReplicas: 2, ToReplicas: 3, Fields: []string{"command", "env.DB_URL"}},
		{Service: "db", Action: stackfile.ActionUnchanged, FromRevision: "aaaaaaaaaaaa", ToRevision: "aaaaaaaaaaaa", FromReplicas: 1, ToReplicas: 1},
		{Service: "cache", Action: stackfile.ActionCreate, ToRevision: "cccccccccccc", ToReplicas: 1},
		{Service: "old", Action: stackfile.ActionRemove, FromRevision: "dddddddddddd", FromReplicas: 2},
		{Service: "worker", Action: stackfile.ActionScale, FromRevision: "eeeeeeeeeeee", ToRevision: "eeeeeeeeeeee", FromReplicas: 1, ToReplicas: 4},
	}}}}
	same(t, "dry run", formatApplyResult(res, false), `stack web (dry run, nothing changed):
SERVICE  ACTION     REVISION                      REPLICAS  CHANGED
api      update     3f9a2c1b7d4e -> 7b1d4e09aa31  2 -> 3    command, env.DB_URL
db       unchanged  aaaaaaaaaaaa                  1         -
cache    create     cccccccccccc                  1         -
old      remove     dddddddddddd                  2         -
worker   scale      eeeeeeeeeeee                  1 -> 4    -
`)
}

// TestSVC5WaitProgressAndFailure: --wait prints the recorded plan, each
// service line and event the daemon streams (slot by slot), and one
// verdict: on failure the reason of each failed service with its output,
// what converged and what was still rolling out; never "converged" after
// "rollout failed".
func TestSVC5WaitProgressAndFailure(t *testing.T) {
	var pp progressPrinter
	updating := messages.ServiceStatus{Stack: "web", Service: "api", State: messages.ServiceUpdating, Desired: 2, Healthy: 1,
		Rollout: &messages.RolloutStatus{Slots: []messages.SlotStatus{{Slot: 1, State: "done"}, {Slot: 2, State: "updating"}}}}
	starting := messages.ServiceStatus{Stack: "web", Service: "db", State: messages.ServiceStarting, Desired: 2, Healthy: 1,
		Replicas: []messages.ReplicaStatus{{Slot: 1, Phase: "serving"}, {Slot: 2, Phase: "probing"}}}
	steps := []control.ApplyProgress{
		{Planned: []control.StackPlan{{Stack: "web", Deployment: "d-0002", Changes: []stackfile.Change{{Service: "api", Action: stackfile.ActionUpdate, FromRevision: "aaaaaaaaaaaa", ToRevision: "bbbbbbbbbbbb", FromReplicas: 2, ToReplicas: 2}}}}},
		{Service: &updating},
		{Service: &starting},
		{Service: &messages.ServiceStatus{Stack: "web", Service: "cache", State: messages.ServiceConverged, Desired: 1, Healthy: 1}, Note: "holding 5s before the verdict (update_config.monitor)"},
		{Event: &messages.Event{Seq: 41, Kind: messages.KindReplicaFailed, Stack: "web", Service: "api", Instance: "web-api-2-x2", Message: "unhealthy: HTTP 500\nbody"}},
		{Event: &messages.Event{Seq: 42, Kind: messages.KindDeployFailed, Stack: "web", Service: "api", Message: "revision bbbbbbbbbbbb: slot 2 did not become healthy within 1m32s"}},
		{Event: &messages.Event{Seq: 43, Kind: messages.KindRolloutRolledBack, Stack: "web", Service: "api", Message: "rolled back to revision aaaaaaaaaaaa"}},
	}
	var got string
	for _, s := range steps {
		got += pp.next(s)
	}
	res := control.ApplyResult{Stacks: steps[0].Planned, Outcome: control.OutcomeFailed,
		Verdicts: []control.ServiceVerdict{
			{Stack: "web", Service: "api", Outcome: control.OutcomeFailed, Reason: "deploy.failed: revision bbbbbbbbbbbb: slot 2 did not become healthy within 1m32s", Seq: 42},
			{Stack: "web", Service: "db"},
			{Stack: "web", Service: "cache", Outcome: control.OutcomeConverged}},
		// After the rollback the service converged on the old revision:
		// its state says so, the verdict does not.
		Failed: []messages.ServiceStatus{{Stack: "web", Service: "api", State: messages.ServiceConverged, FailureOutput: "listening\nhealth: 500\n"}}}
	got += formatApplyResult(res, pp.planned)
	same(t, "wait", got, `stack web: deployment d-0002 recorded:
SERVICE  ACTION  REVISION                      REPLICAS  CHANGED
api      update  aaaaaaaaaaaa -> bbbbbbbbbbbb  2         -

rolling out:
web/api  updating  1/2 healthy  slot 1 done, 2 updating
web/db  starting  1/2 healthy  slot 1 serving, 2 probing
web/cache  converged  1/1 healthy  [holding 5s before the verdict (update_config.monitor)]
  #41 replica.failed web-api-2-x2: unhealthy: HTTP 500\nbody
  #42 deploy.failed web/api: revision bbbbbbbbbbbb: slot 2 did not become healthy within 1m32s
  #43 rollout.rolled_back web/api: rolled back to revision aaaaaaaaaaaa

rollout failed:
  web/api: deploy.failed: revision bbbbbbbbbbbb: slot 2 did not become healthy within 1m32s
    | listening
    | health: 500
  converged: web/cache
  still rolling out: web/db (engenho status follows them)
`)
	if strings.Contains(got[strings.Index(got, "rollout failed:"):], "\nconverged\n") {
		t.Errorf("a failed rollout also says converged:\n%s", got)
	}
	same(t, "converged", formatApplyResult(control.ApplyResult{Outcome: control.OutcomeConverged, Verdicts: res.Verdicts[2:]}, true), "\nconverged\n")
	same(t, "nothing", formatApplyResult(control.ApplyResult{Outcome: control.OutcomeConverged}, true), "\nnothing to roll out\n")
}

// TestSVC20EventLine: one event per line with its sequence, time, level,
// kind, subject, message and fields in key order.
func TestSVC20EventLine(t *testing.T) {
	e := messages.Event{Seq: 12, UnixMs: now.UnixMilli(), Level: messages.LevelWarn, Kind: messages.KindHealthUnhealthy, Stack: "web", Service: "api",
		Instance: "web-api-2-x1", Message: "no healthy replica for 20s", Fields: map[string]string{"b": "2", "a": "1"}}
	same(t, "event", formatEvent(e, time.UTC), "#12 2025-03-01 12:00:00.000 warn  health.unhealthy web/api web-api-2-x1: no healthy replica for 20s (a=1, b=2)")
	same(t, "daemon event", formatEvent(messages.Event{Seq: 1, Level: messages.LevelInfo, Kind: messages.KindDaemonBooted, Message: "up"}, time.UTC),
		"#1 1970-01-01 00:00:00.000 info  daemon.booted: up")
}

// SVC-20: probe output and workload text in an event stay on one line in
// the human output: newlines, tabs, carriage returns and terminal escapes
// are written as escapes, in the message and in the fields.
func TestSVC20EventLineEscapesControlCharacters(t *testing.T) {
	e := messages.Event{Seq: 11, UnixMs: now.UnixMilli(), Level: messages.LevelWarn, Kind: messages.KindReplicaFailed, Stack: "b", Service: "sick",
		Message: "unhealthy: line one\nline two\r\n\x1b[31mred\ttab; failure 1", Fields: map[string]string{"output": "a\nb", "path": `C:\dir`}}
	got := formatEvent(e, time.UTC)
	same(t, "escaped", got, `#11 2025-03-01 12:00:00.000 warn  replica.failed b/sick: unhealthy: line one\nline two\r\n\x1b[31mred\ttab; failure 1 (output=a\nb, path=C:\dir)`)
	if strings.ContainsFunc(got, unicode.IsControl) {
		t.Errorf("a control character reached the terminal: %q", got)
	}
	same(t, "plain text untouched", escapeControl("héllo wörld ✓"), "héllo wörld ✓")
}

func TestFormatHelpers(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 45 * time.Second: "45s", 3 * time.Minute: "3m", 2 * time.Hour: "2h", 2*time.Hour + 5*time.Minute: "2h5m",
		72 * time.Hour: "3d", 76 * time.Hour: "3d4h",
	} {
		same(t, d.String(), short(d), want)
	}
	same(t, "until past", until(now, now.Add(-time.Second)), "now")
	same(t, "oneLine", oneLine("a\n  b\tc", 10), "a b c")
	same(t, "oneLine cut", oneLine("abcdefghijkl", 8), "abcde...")
	same(t, "lastLines", lastLines("1\n2\n3\n", 2, "| "), "| (1 earlier lines)\n| 2\n| 3\n")
	same(t, "log chunk", formatLogChunk(control.LogChunk{Slot: 2, Text: "a\nb"}, true), "[2] a\n[2] b\n")
	same(t, "log chunk raw", formatLogChunk(control.LogChunk{Slot: 2, Text: "a\n"}, false), "a\n")
	same(t, "intent", formatIntent(control.ServiceIntentResult{Stack: "web", Service: "api", Stopped: true}), "web/api: already stopped\n")
}

// SVC-17, SVC-23: remove and rollback print what they did, service by
// service, with the deployment they recorded; a second remove says the
// stack is already going; a rollback adds its override notes. Never "no
// changes" when something changed.
func TestSVC17RemoveAndRollbackSayWhatTheyDid(t *testing.T) {
	removed := control.ChangeResult{Stack: "web", Deployment: "4", Changes: []stackfile.Change{
		{Service: "api", Action: stackfile.ActionRemove, FromRevision: "aaaaaaaaaaaa", FromReplicas: 2}}}
	same(t, "remove", formatRemove(removed), "removing stack web (deployment 4):\nSERVICE  ACTION  REVISION      REPLICAS  CHANGED\napi      remove  aaaaaaaaaaaa  2         -\n")
	removed.AlreadyRemoving = true
	same(t, "remove again", formatRemove(removed), "stack web is already being removed (deployment 4):\nSERVICE  ACTION  REVISION      REPLICAS  CHANGED\napi      remove  aaaaaaaaaaaa  2         -\n")
	// remove --volumes: the named volumes it deleted once the stack was gone.
	removed.VolumesDeleted = []string{"web_data", "web_media"}
	same(t, "remove --volumes", formatRemove(removed), "stack web is already being removed (deployment 4):\nSERVICE  ACTION  REVISION      REPLICAS  CHANGED\napi      remove  aaaaaaaaaaaa  2         -\ndeleted volume web_data\ndeleted volume web_media\n")
	back := control.ChangeResult{Stack: "web", Deployment: "1", Changes: []stackfile.Change{
		{Service: "api", Action: stackfile.ActionUpdate, FromRevision: "bbbbbbbbbbbb", ToRevision: "aaaaaaaaaaaa", FromReplicas: 2, ToReplicas: 2, Fields: []string{"command"}}}}
	same(t, "rollback", formatRollback(back), "rolling back stack web to deployment 1:\nSERVICE  ACTION  REVISION                      REPLICAS  CHANGED\napi      update  bbbbbbbbbbbb -> aaaaaaaaaaaa  2         command\n")
	// SVC-23: and what the rollback leaves for the stack file to undo.
	back.Notes = []string{"a reload or restart keeps deployment 1 until the stack file changes; `engenho rollback web` goes back to deployment 2, the stack file's"}
	same(t, "rollback with its override", formatRollback(back), "rolling back stack web to deployment 1:\nSERVICE  ACTION  REVISION                      REPLICAS  CHANGED\n"+
		"api      update  bbbbbbbbbbbb -> aaaaaaaaaaaa  2         command\n"+
		"note: a reload or restart keeps deployment 1 until the stack file changes; `engenho rollback web` goes back to deployment 2, the stack file's\n")
}

// TestSVC19StatusBackoffRow: a service that backs off shows its counts,
// the reason and when its next attempt is due; a long message is cut, the
// next attempt never is (issue 13).
func TestSVC19StatusBackoffRow(t *testing.T) {
	next := now.Add(56 * time.Second)
	long := "slot 1: " + strings.Repeat("x", 80) + " (4 failures)"
	svcs := []messages.ServiceStatus{
		{Stack: "crash", Service: "bad", State: messages.ServiceBackoff, Message: "slot 1: exited with code 1 (4 failures)",
			Reason: "exited with code 1", NextAttempt: &next, Revision: "a6c0a22c7130", Desired: 1},
		{Stack: "crash", Service: "long", State: messages.ServiceBackoff, Message: long, NextAttempt: &next, Revision: "b6c0a22c7130", Desired: 2, Running: 1, Healthy: 1},
		{Stack: "crash", Service: "loop", State: messages.ServiceFailing, Message: "slot 1: exited with code 1 (5 failures); up again, not ye...able",
			Reason: "exited with code 1", Revision: "c6c0a22c7130", Desired: 1, Running: 1, Healthy: 1},
	}
	same(t, "backoff rows", serviceTable(svcs, now), `SERVICE     STATE    DESIRED  RUNNING  HEALTHY  REVISION      MESSAGE
crash/bad   backoff  1        0        0        a6c0a22c7130  slot 1: exited with code 1 (4 failures); next attempt in 56s
crash/long  backoff  2        1        1        b6c0a22c7130  slot 1: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...; next attempt in 56s
crash/loop  failing  1        1        1        c6c0a22c7130  slot 1: exited with code 1 (5 failures); up again, not ye...
`)
}

// DRV-16: engenho top shows one row per sampled replica: CPU in cores,
// memory now and peak, processes; replicas without a sample are left out.
func TestDRV16TopTable(t *testing.T) {
	res := sampleStatus()
	res.Services[0].Replicas[0].Instance = "web-api-1-ab12cd34"
	res.Services[0].Replicas[0].Usage.MemoryPeakBytes = 80 << 20
	res.Services[0].Replicas[1].Instance = "web-api-2-ef56ab78"
	same(t, "top", formatTop(topRows(res), now, 2*time.Second), `engenho top  12:00:00  refresh 2s; CPU in cores over the last 10s

REPLICA    INSTANCE            PHASE    CPU   MEM      PEAK    PIDS
web/api/1  web-api-1-ab12cd34  serving  0.25  64 MiB   80 MiB  3
web/api/2  web-api-2-ef56ab78  serving  -     1.5 MiB  -       1
`)
	same(t, "top, nothing sampled", formatTop(nil, now, time.Second), `engenho top  12:00:00  refresh 1s; CPU in cores over the last 10s

no running replica has been sampled yet (usage.interval; 0 turns sampling off)
`)
}
