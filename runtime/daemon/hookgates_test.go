package daemon

import (
	"testing"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/fake"
	"github.com/engenho/engenho/drivers/objstore"
	objfake "github.com/engenho/engenho/drivers/objstore/fake"
)

// CHS-2: each hook is used only when it is compiled in (Options.Hooks)
// and the config enables chaos; the shipped binary (no hooks) never uses
// one, whatever the settings say.
func TestHookGates(t *testing.T) {
	type wrapped struct{ drivers.Driver }
	type wrappedStore struct{ objstore.Store }
	hooks := &Hooks{
		WrapDriver:       func(d drivers.Driver) drivers.Driver { return wrapped{d} },
		WrapStore:        func(s objstore.Store, _ string) objstore.Store { return wrappedStore{s} },
		AllowInjectPanic: true,
		SkipJournalCheck: func() bool { return true },
	}
	drv, store := fake.New(fake.Options{}), objfake.New(objfake.Options{})
	for _, c := range []struct {
		name    string
		hooks   *Hooks
		enabled bool
		on      bool
	}{
		{"shipped binary", nil, false, false},
		{"shipped binary, settings enabled", nil, true, false},
		{"chaos build, not enabled", hooks, false, false},
		{"chaos build, enabled", hooks, true, true},
	} {
		d := &Daemon{opts: Options{Hooks: c.hooks}}
		s := Settings{ChaosEnabled: c.enabled}
		_, wd := d.wrapDriver(s, drv).(wrapped)
		_, ws := d.wrapStore(s, store, "p").(wrappedStore)
		got := []bool{d.chaosOn(s), wd, ws, d.allowInjectPanic(s), d.skipJournalCheck(s)}
		for i, g := range got {
			if g != c.on {
				t.Errorf("%s: gate %d is %v, want %v", c.name, i, g, c.on)
			}
		}
	}
	// A chaos build may leave hooks out.
	d := &Daemon{opts: Options{Hooks: &Hooks{}}}
	s := Settings{ChaosEnabled: true}
	if d.wrapDriver(s, drv) != drv || d.wrapStore(s, store, "p") != store || d.allowInjectPanic(s) || d.skipJournalCheck(s) {
		t.Fatal("an empty Hooks changed something")
	}
}
