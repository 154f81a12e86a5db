package service

import (
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/rs/zerolog"

	"github.com/engenho/engenho/actors/supervise"
	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/messages"
)

// restartingFake is the fake driver as a drivers.RestartWatcher (as the
// process driver is).
type restartingFake struct{ *fake.Driver }

func (d restartingFake) WatchRestart(name string, _ drivers.RestartPolicy, fn func(drivers.Exit)) (func(), error) {
	return d.Watch(name, fn)
}

type noEvents struct{}

func (noEvents) Emit(messages.Event) {}

type noStore struct{}

func (noStore) FailedRevisions(string, string) (map[string]bool, error)  { return nil, nil }
func (noStore) MarkFailed(string, string, string, string) error          { return nil }
func (noStore) SaveProgress(string, string, string, string, []int) error { return nil }

// askRevisions asks the service actor, in its own goroutine, whether it
// has its driver yet and which of its revisions' shared replica Configs
// say the driver restarts runs itself.
type askRevisions struct{ reply chan revisionsSeen }

type revisionsSeen struct {
	drv      bool
	restarts map[string]bool
}

type revisionSpy struct{ *Actor }

func (s revisionSpy) Receive(c *actor.Context) {
	if m, ok := c.Message().(askRevisions); ok {
		seen := revisionsSeen{drv: s.drv != nil, restarts: map[string]bool{}}
		for rev, rd := range s.defs {
			seen.restarts[rev] = rd.cfg.Policy.DriverRestarts
		}
		m.reply <- seen
		return
	}
	s.Actor.Receive(c)
}

// PERF-1, PERF-3: on a driver that restarts runs itself, the Config a
// revision shares with its replicas says so, for the revision the service
// actor was made with too (defined before the actor knew its driver):
// otherwise every replica of it copies the Config to set DriverRestarts,
// and the sharing saves nothing for the revision most replicas run.
func TestPERF3SharedConfigOfTheFirstRevisionSaysDriverRestarts(t *testing.T) {
	st, err := stackfile.Parse("s.yaml", []byte("services:\n  web:\n    command: [\"worker\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	svc := st.Services["web"]
	clk := clock.New()
	drv := restartingFake{fake.New(fake.Options{Clock: clk, Seed: 1})}
	env := Env{
		Driver: func(string) (drivers.Driver, bool) { return drv, true },
		Events: noEvents{}, Board: supervise.NewBoard(), Store: noStore{}, StepTimeout: time.Minute,
	}
	def := messages.ServiceDefinition{Stack: "s", Current: messages.ServiceRevision{Deployment: "d1", Revision: "r1", Definition: svc}}

	engine, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	sys := supervise.NewSystem(engine, clk, zerolog.Nop())
	exited := make(chan messages.ChildExited, 1)
	sys.OnRootExit = func(m messages.ChildExited) { exited <- m }
	pid := sys.SpawnRoot(supervise.ChildSpec{Name: "service:web", Produce: func(h *supervise.Handle) actor.Receiver {
		return revisionSpy{Produce(env, def, false)(h).(*Actor)}
	}})
	defer func() {
		engine.Send(pid, messages.Shutdown{})
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			t.Error("the service actor did not stop within 30s")
		}
	}()

	var seen revisionsSeen
	for deadline := time.Now().Add(30 * time.Second); !seen.drv; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the service actor has no driver after 30s")
		}
		reply := make(chan revisionsSeen, 1)
		engine.Send(pid, askRevisions{reply: reply})
		select {
		case seen = <-reply:
		case <-time.After(30 * time.Second):
			t.Fatal("the service actor did not answer within 30s")
		}
	}
	if !seen.restarts["r1"] {
		t.Fatalf("revision r1's shared Config does not say DriverRestarts (%v): each replica would copy it", seen.restarts)
	}
}
