package daemon

import (
	"reflect"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/configs/daemonconfig"
)

// SUP-10: the config file's default ladder, converted at the composition
// root, is the ladder package's default, and a configured one arrives
// unchanged (a copy: the settings never share the config's slice).
func TestSUP10SettingsLadder(t *testing.T) {
	def := daemonconfig.Defaults()
	if got := SettingsFrom(&def).Ladder; !reflect.DeepEqual(got, ladder.Default()) {
		t.Fatalf("default ladder %+v, want %+v", got, ladder.Default())
	}
	if got := DefaultSettings().Ladder; !reflect.DeepEqual(got, ladder.Default()) {
		t.Fatalf("DefaultSettings ladder %+v, want %+v", got, ladder.Default())
	}
	c := daemonconfig.Defaults()
	c.Supervision.Ladder = daemonconfig.Ladder{Immediate: 1, Delays: []time.Duration{time.Second}, Cap: time.Minute, Jitter: 0.5, Stable: 2 * time.Minute}
	s := SettingsFrom(&c)
	want := ladder.Config{Immediate: 1, Delays: []time.Duration{time.Second}, Cap: time.Minute, Jitter: 0.5, Stable: 2 * time.Minute}
	if !reflect.DeepEqual(s.Ladder, want) {
		t.Fatalf("configured ladder %+v, want %+v", s.Ladder, want)
	}
	c.Supervision.Ladder.Delays[0] = time.Hour
	if s.Ladder.Delays[0] != time.Second {
		t.Fatal("the settings share the config's delays")
	}
}
