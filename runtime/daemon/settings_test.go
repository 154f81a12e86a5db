package daemon

import (
	"reflect"
	"testing"
	"time"

	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/configs/daemonconfig"
	"github.com/engenho/engenho/drivers/ports"
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

// SVC-24: the host-port range reaches the settings: the default
// 20000-20999, or the configured one.
func TestSVC24SettingsInstanceRange(t *testing.T) {
	def := daemonconfig.Defaults()
	if got := SettingsFrom(&def).InstanceRange; got != ports.DefaultRange || got.String() != "20000-20999" {
		t.Fatalf("default range %v", got)
	}
	if got := DefaultSettings().InstanceRange; got != ports.DefaultRange {
		t.Fatalf("DefaultSettings range %v", got)
	}
	c := daemonconfig.Defaults()
	c.Ports.InstanceRange = "30000-30099"
	if got := SettingsFrom(&c).InstanceRange; got != (ports.Range{Low: 30000, High: 30099}) {
		t.Fatalf("configured range %v", got)
	}
}
