package daemon_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/daemon"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// Options.Hooks are untagged and nil by default; a fake hook proves what
// the daemon hands them (the chaos build's hooks are in
// cmd/engenho/chaos_hooks.go).

// fakeHooks records what the daemon hands its hooks.
type fakeHooks struct {
	mu      sync.Mutex
	drivers []string
	stores  []string
	checks  int // SkipJournalCheck calls
}

type wrappedDriver struct{ drivers.Driver }
type wrappedStore struct{ objstore.Store }

func (f *fakeHooks) hooks() *daemon.Hooks {
	return &daemon.Hooks{
		WrapDriver: func(d drivers.Driver) drivers.Driver {
			f.mu.Lock()
			f.drivers = append(f.drivers, d.Name())
			f.mu.Unlock()
			return wrappedDriver{d}
		},
		WrapStore: func(s objstore.Store, prefix string) objstore.Store {
			f.mu.Lock()
			f.stores = append(f.stores, prefix)
			f.mu.Unlock()
			return wrappedStore{s}
		},
		AllowInjectPanic: true,
		SkipJournalCheck: func() bool {
			f.mu.Lock()
			f.checks++
			f.mu.Unlock()
			return false
		},
		Ops: map[string]daemon.OpFunc{
			"echo": func(_ context.Context, rt daemon.Running, a control.ChaosArgs) (control.ChaosResult, error) {
				_, wrapped := rt.Drivers["process"].(wrappedDriver)
				_, root := rt.Tree.Get("root")
				if !wrapped || !root {
					return control.ChaosResult{}, control.Errorf(control.CodeInvalid, "wrapped %v, root %v", wrapped, root)
				}
				return control.ChaosResult{Kind: a.Kind, Target: a.Target, Detail: "echo " + a.Params["say"]}, nil
			},
			"panic": func(_ context.Context, rt daemon.Running, a control.ChaosArgs) (control.ChaosResult, error) {
				before, _ := rt.Tree.Get(a.Target)
				rt.Deliver(a.Target, messages.InjectPanic{Reason: "test"})
				deadline := time.Now().Add(30 * time.Second)
				for time.Now().Before(deadline) {
					if n, ok := rt.Tree.Get(a.Target); ok && n.Gen != before.Gen {
						return control.ChaosResult{Kind: a.Kind, Target: a.Target, Detail: "restarted"}, nil
					}
					time.Sleep(20 * time.Millisecond)
				}
				return control.ChaosResult{}, control.Errorf(control.CodeInvalid, "%s did not restart", a.Target)
			},
		},
	}
}

// inProcess runs a daemon in this test process with hooks on config.
func inProcess(t *testing.T, config string, hooks *daemon.Hooks) (*daemon.Daemon, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "engenho.yaml")
	if err := os.WriteFile(cfg, []byte("data_dir: data\nlog: {level: info}\n"+config), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := daemon.New(daemon.Options{ConfigPath: cfg, Bin: bin, NoSignals: true, Hooks: hooks})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Error("the daemon did not exit")
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for d.Snapshot().State.Name != lifecycle.Running {
		if time.Now().After(deadline) {
			t.Fatalf("daemon %s, not running", d.Snapshot().State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d, filepath.Join(dir, "data", "control", "engenho.sock")
}

// CHS-2: with hooks and chaos.enabled the daemon wraps every driver and
// the object store, lets actors panic on InjectPanic and answers the chaos
// op's kinds through Hooks.Ops, with the running tree and drivers.
func TestCHS2HooksWireFaultInjection(t *testing.T) {
	f := &fakeHooks{}
	_, sock := inProcess(t, "chaos: {enabled: true}\n", f.hooks())
	f.mu.Lock()
	gotDrivers, gotStores, checks := append([]string(nil), f.drivers...), append([]string(nil), f.stores...), f.checks
	f.mu.Unlock()
	if len(gotDrivers) != 1 || gotDrivers[0] != "process" || len(gotStores) != 1 || gotStores[0] != "engenho" {
		t.Fatalf("wrapped drivers %v, stores %v", gotDrivers, gotStores)
	}
	if checks != 1 {
		t.Fatalf("SkipJournalCheck asked %d times in one boot, want 1", checks)
	}
	c, err := control.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Chaos(t.Context(), control.ChaosArgs{Kind: "echo", Target: "x", Params: map[string]string{"say": "hi"}})
	if err != nil || res.Detail != "echo hi" || res.Target != "x" {
		t.Fatalf("echo: %+v %v", res, err)
	}
	if res, err := c.Chaos(t.Context(), control.ChaosArgs{Kind: "panic", Target: "root/activator"}); err != nil || res.Detail != "restarted" {
		t.Fatalf("an injected panic (AllowInjectPanic): %+v %v", res, err)
	}
	_, err = c.Chaos(t.Context(), control.ChaosArgs{Kind: "nope"})
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != control.CodeInvalid || !strings.Contains(ce.Message, "want one of echo, panic") {
		t.Fatalf("unknown kind: %v", err)
	}
}

// CHS-2: hooks alone do nothing: without chaos.enabled nothing is wrapped,
// no plant is asked and the chaos op is refused (and no actor panics on
// InjectPanic: TestHookGates).
func TestCHS2HooksNeedChaosEnabled(t *testing.T) {
	f := &fakeHooks{}
	_, sock := inProcess(t, "", f.hooks())
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.drivers) != 0 || len(f.stores) != 0 || f.checks != 0 {
		t.Fatalf("hooks used without chaos.enabled: drivers %v, stores %v, journal check asked %d times", f.drivers, f.stores, f.checks)
	}
	c, err := control.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Chaos(t.Context(), control.ChaosArgs{Kind: "echo"})
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != control.CodeRefused || !strings.Contains(ce.Message, "chaos.enabled") {
		t.Fatalf("chaos op without chaos.enabled: %v", err)
	}
}
