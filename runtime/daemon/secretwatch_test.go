package daemon

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
)

const rotStack = `name: web
secrets:
  pw: {file: pw.txt}
services:
  api:
    driver: fake
    command: ["/bin/api"]
    secrets: [pw]
  cache:
    driver: fake
    command: ["/bin/cache"]
    secrets: [{source: pw, target: password}]
    x-engenho: {secrets: {on_change: none}}
  plain:
    driver: fake
    command: ["/bin/plain"]
`

// rotRig is a deployer rig with a project directory holding pw.txt, the
// stack applied from it, and a secret watch on a fake clock.
type rotRig struct {
	*deployerRig
	project string
	clk     *clock.Fake
	w       *secretWatch
	rounds  chan struct{}

	logMu  sync.Mutex
	logged []string
	board  []messages.ServiceStatus
}

func newRotRig(t *testing.T, value string) *rotRig {
	t.Helper()
	r := &rotRig{deployerRig: newRig(t, t.TempDir()), project: t.TempDir(), clk: clock.NewFake(rigNow), rounds: make(chan struct{}, 10)}
	r.writeSecret(value)
	st, err := stackfile.ParseWith(filepath.Join(r.project, "web.yaml"), []byte(rotStack), stackfile.Options{Dir: r.project})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.d.Apply(context.Background(), st, filepath.Join(r.project, "web.yaml"), false, nil); err != nil {
		t.Fatal(err)
	}
	r.w = makeSecretWatch(r.d, r.clk, func(msg string, err error) {
		r.logMu.Lock()
		r.logged = append(r.logged, msg)
		r.logMu.Unlock()
	}, func() []messages.ServiceStatus { return r.board })
	r.w.onRound = func() { r.rounds <- struct{}{} }
	t.Cleanup(r.w.stop)
	return r
}

func (r *rotRig) writeSecret(value string) {
	r.t.Helper()
	p := filepath.Join(r.project, "pw.txt")
	if err := os.WriteFile(p+".tmp", []byte(value), 0o600); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		r.t.Fatal(err)
	}
}

// recorded is the stack's current definition as the journal has it.
func (r *rotRig) recorded() (journal.StackState, *stackfile.Stack) {
	r.t.Helper()
	cur, _, err := r.j.Stack("web")
	if err != nil {
		r.t.Fatal(err)
	}
	st, err := stackfile.Unmarshal(cur.Current.Definition, testKey)
	if err != nil {
		r.t.Fatal(err)
	}
	return cur, st
}

// A changed secret file is a rotation: the definition is recorded again
// with the new value, one secret.rotated event per service names stack,
// service and secret (never the value); on_change restart gives the
// service a new revision, on_change none keeps it and marks the secret
// stale while an instance from before runs; a service without the secret
// is untouched. An unchanged file records nothing.
func TestSecretWatchRotates(t *testing.T) {
	const old, fresh = "old-value-5d1c", "new-value-9ab2"
	r := newRotRig(t, old)
	before, _ := r.recorded()
	r.w.check()
	if after, _ := r.recorded(); after.Current.ID != before.Current.ID || len(r.takeEvents()) != 0 {
		t.Fatal("an unchanged secret file recorded a deployment or an event")
	}
	r.board = []messages.ServiceStatus{{Stack: "web", Service: "cache", Replicas: []messages.ReplicaStatus{{Instance: "web-cache-1-aaaa"}}}}

	r.writeSecret(fresh)
	r.w.check()
	after, st := r.recorded()
	if after.Current.ID == before.Current.ID {
		t.Fatal("the rotation recorded no deployment")
	}
	for _, svc := range []string{"api", "cache"} {
		if got := st.Services[svc].Secrets[0].Value.Reveal(); got != fresh {
			t.Errorf("%s: the recorded value is not the file's new one", svc)
		}
	}
	if after.Current.Revisions["api"] == before.Current.Revisions["api"] {
		t.Error("on_change restart: api's revision must change")
	}
	for _, svc := range []string{"cache", "plain"} {
		if after.Current.Revisions[svc] != before.Current.Revisions[svc] {
			t.Errorf("%s's revision changed", svc)
		}
	}
	evs := r.takeEvents()
	var got []string
	for _, ev := range evs {
		if ev.Kind != messages.KindSecretRotated || ev.Stack != "web" || ev.Fields["secret"] != "pw" || strings.Contains(ev.Message, fresh) || strings.Contains(ev.Message, old) {
			t.Errorf("event %+v", ev)
		}
		got = append(got, ev.Service+":"+ev.Fields["on_change"])
	}
	if slices.Sort(got); !slices.Equal(got, []string{"api:restart", "cache:none"}) {
		t.Errorf("secret.rotated events: %v", got)
	}
	cache := r.board[0]
	if s := r.w.staleSecrets(cache); !slices.Equal(s, []string{"pw"}) {
		t.Errorf("stale secrets of cache = %v, want [pw]", s)
	}
	if s := r.w.staleSecrets(messages.ServiceStatus{Stack: "web", Service: "api", Replicas: cache.Replicas}); len(s) != 0 {
		t.Errorf("api restarts: nothing stale, got %v", s)
	}
	cache.Replicas = []messages.ReplicaStatus{{Instance: "web-cache-1-bbbb"}} // replaced
	if s := r.w.staleSecrets(cache); len(s) != 0 {
		t.Errorf("a replaced instance has the new value; stale = %v", s)
	}

	// The next round sees the value it recorded: nothing more.
	r.w.check()
	if again, _ := r.recorded(); again.Current.ID != after.Current.ID || len(r.takeEvents()) != 0 {
		t.Error("a second round rotated again")
	}
}

// A secret file that cannot be read keeps the recorded value and is
// logged once, not every round; a stack held by a rollback is not
// rotated (the rollback's pin holds until the next apply).
func TestSecretWatchKeepsTheValue(t *testing.T) {
	r := newRotRig(t, "kept-value")
	before, _ := r.recorded()
	os.Remove(filepath.Join(r.project, "pw.txt"))
	r.w.check()
	r.w.check()
	if after, st := r.recorded(); after.Current.ID != before.Current.ID || st.Services["api"].Secrets[0].Value.Reveal() != "kept-value" {
		t.Error("an unreadable file changed the recorded value")
	}
	r.logMu.Lock()
	logged := slices.Clone(r.logged)
	r.logMu.Unlock()
	if len(logged) != 1 || !strings.Contains(logged[0], "pw.txt") {
		t.Errorf("logged %q, want one line naming the file", logged)
	}

	r.writeSecret("v2")
	r.w.check() // rotates: a second deployment to roll back from
	r.writeSecret("v3")
	if _, err := r.d.Rollback("web", journal.Who{}); err != nil {
		t.Fatal(err)
	}
	pinned, _ := r.recorded()
	r.w.check()
	if after, _ := r.recorded(); after.Current.ID != pinned.Current.ID {
		t.Error("a stack held by a rollback was rotated")
	}
}

// SUP-19: the watch reads the files each secretRefresh on its clock, and
// not after stop.
func TestSecretWatchRefreshOnTheClock(t *testing.T) {
	r := newRotRig(t, "one")
	r.w.start()
	r.writeSecret("two")
	r.clk.Advance(secretRefresh - time.Millisecond)
	select {
	case <-r.rounds:
		t.Fatal("a round before the refresh interval")
	default:
	}
	r.clk.Advance(time.Millisecond)
	<-r.rounds
	if _, st := r.recorded(); st.Services["api"].Secrets[0].Value.Reveal() != "two" {
		t.Fatal("the round did not rotate")
	}
	r.clk.Advance(secretRefresh)
	<-r.rounds // and it goes on
	r.w.stop()
	r.clk.Advance(secretRefresh)
	select {
	case <-r.rounds:
		t.Fatal("a round after stop")
	default:
	}
}

// After a daemon restart the in-memory marks are gone, but the journal's
// secret.rotated events (on_change none) are not: the watch reads them
// back in its first round, and an adopted instance started before the
// rotation is still listed as holding the old value; one started after
// is not.
func TestSecretWatchStaleAfterRestart(t *testing.T) {
	r := newRotRig(t, "v1")
	at := time.UnixMilli(1_700_000_000_000)
	if _, err := r.w.dep.journal.Append(
		messages.Event{UnixMs: at.UnixMilli(), Kind: messages.KindSecretRotated, Stack: "web", Service: "cache",
			Fields: map[string]string{"secret": "pw", "on_change": stackfile.OnChangeNone}},
		messages.Event{UnixMs: at.UnixMilli(), Kind: messages.KindSecretRotated, Stack: "web", Service: "api",
			Fields: map[string]string{"secret": "pw", "on_change": stackfile.OnChangeRestart}},
	); err != nil {
		t.Fatal(err)
	}
	r.w.seedStale()
	old := messages.ServiceStatus{Stack: "web", Service: "cache", Replicas: []messages.ReplicaStatus{{Instance: "web-cache-1-aaaa", StartedAt: at.Add(-time.Minute)}}}
	if s := r.w.staleSecrets(old); !slices.Equal(s, []string{"pw"}) {
		t.Errorf("an instance from before the rotation: stale = %v, want [pw]", s)
	}
	api := messages.ServiceStatus{Stack: "web", Service: "api", Replicas: old.Replicas}
	if s := r.w.staleSecrets(api); len(s) != 0 {
		t.Errorf("on_change restart marks nothing stale: %v", s)
	}
	replaced := messages.ServiceStatus{Stack: "web", Service: "cache", Replicas: []messages.ReplicaStatus{{Instance: "web-cache-1-bbbb", StartedAt: at.Add(time.Minute)}}}
	if s := r.w.staleSecrets(replaced); len(s) != 0 {
		t.Errorf("an instance started after the rotation has the new value: stale = %v", s)
	}
}

// PERF-3: the watch sleeps while no recorded stack has a file secret. Its
// first round runs (it reads back the stale marks), then no round is
// armed; a stack applied with a file secret arms it again, and once that
// stack is removed it sleeps again.
func TestPERF3SecretWatchArmedOnlyWithFileSecrets(t *testing.T) {
	r := &rotRig{deployerRig: newRig(t, t.TempDir()), project: t.TempDir(), clk: clock.NewFake(rigNow), rounds: make(chan struct{}, 10)}
	r.writeSecret("one")
	r.w = makeSecretWatch(r.d, r.clk, func(string, error) {}, func() []messages.ServiceStatus { return nil })
	r.w.onRound = func() { r.rounds <- struct{}{} }
	r.d.OnChange(r.w.poke)
	t.Cleanup(r.w.stop)
	apply := func(file, content string) {
		t.Helper()
		st, err := stackfile.ParseWith(filepath.Join(r.project, file), []byte(content), stackfile.Options{Dir: r.project})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.d.Apply(context.Background(), st, filepath.Join(r.project, file), false, nil); err != nil {
			t.Fatal(err)
		}
	}
	armed := func() bool {
		r.w.mu.Lock()
		defer r.w.mu.Unlock()
		return r.w.timer != nil
	}
	apply("plain.yaml", "name: plain\nservices:\n  a:\n    driver: fake\n    command: [\"/bin/a\"]\n")
	r.w.start()
	r.clk.Advance(secretRefresh)
	<-r.rounds // the first round
	if armed() {
		t.Fatal("a round is armed with no file secret recorded")
	}
	r.clk.Advance(3 * secretRefresh)
	select {
	case <-r.rounds:
		t.Fatal("a round ran with no file secret recorded")
	default:
	}

	apply("web.yaml", rotStack) // pokes the watch
	if !armed() {
		t.Fatal("applying a stack with a file secret armed no round")
	}
	r.writeSecret("two")
	r.clk.Advance(secretRefresh)
	<-r.rounds
	if _, st := r.recorded(); st.Services["api"].Secrets[0].Value.Reveal() != "two" {
		t.Fatal("the round did not rotate")
	}
	if !armed() {
		t.Fatal("the watch stopped while a file secret is recorded")
	}

	if err := r.d.Forget("web"); err != nil {
		t.Fatal(err)
	}
	r.clk.Advance(secretRefresh)
	<-r.rounds // armed before the removal; finds nothing to watch
	if armed() {
		t.Fatal("a round is armed after the last stack with a file secret went")
	}
}
