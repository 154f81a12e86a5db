package daemon

import (
	"fmt"
	"strings"

	"github.com/engenho/engenho/configs/daemonconfig"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/config"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// configWatch follows the config file and the stack files it lists
// (DMN-16); each settled change is a ConfigChanged event.
type configWatch struct {
	w    *config.Watcher
	done chan struct{}
}

func newConfigWatch(d *Daemon) *configWatch {
	cw := &configWatch{done: make(chan struct{})}
	w, err := config.Watch(d.opts.ConfigPath, func() []string {
		if c := d.settingsNow().Config; c != nil {
			return c.Stacks
		}
		return nil
	}, 0, d.clk)
	if err != nil {
		d.log.Warn().Err(err).Msg("cannot watch the config; edits apply on SIGHUP or `engenho reconfigure`")
		close(cw.done)
		return cw
	}
	cw.w = w
	go func() {
		defer close(cw.done)
		for ev := range w.Events() {
			if ev.Err != nil {
				d.log.Warn().Err(ev.Err).Msg("config watch")
			}
			if len(ev.Paths) > 0 {
				d.log.Info().Strs("paths", ev.Paths).Msg("config changed on disk")
				d.post(lifecycle.ConfigChanged{})
			}
		}
	}()
	return cw
}

func (w *configWatch) resync() {
	if w.w != nil {
		w.w.Resync()
	}
}

func (w *configWatch) close() {
	if w.w != nil {
		_ = w.w.Close()
	}
	<-w.done
}

// reconfigure re-reads the config and applies in place what can be applied;
// what needs a restart is reported (DMN-16).
func (d *Daemon) reconfigure() {
	s, dg, err := d.opts.Load(d.opts.ConfigPath, d.opts.DataDir)
	if err != nil {
		d.log.Error().Err(err).Msg("config refused; keeping the running one")
		d.in <- input{apply: func() { d.emit(messages.KindConfigRejected, messages.LevelError, err.Error()) }}
		return
	}
	d.in <- input{apply: func() {
		old := d.settings
		restart := restartNeeded(old, s)
		s.DataDir = old.DataDir
		d.setSettings(s, dg)
		d.watch.resync()
		d.log.SetLevel(s.LogLevel)
		msg := "config reloaded"
		if len(restart) > 0 {
			msg += "; restart needed for " + strings.Join(restart, ", ")
		}
		d.emit(messages.KindConfigReloaded, messages.LevelInfo, msg)
		go d.applyConfigStacks()
	}}
}

// restartNeeded lists the settings that only a restart of the daemon
// applies.
func restartNeeded(old, s Settings) []string {
	if old.Config != nil && s.Config != nil {
		return daemonconfig.Diff(old.Config, s.Config).NeedRestart()
	}
	var out []string
	check := func(key string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			out = append(out, key)
		}
	}
	check("data_dir", old.DataDir, s.DataDir)
	check("control", []any{old.ControlGroup, old.ControlIdleTimeout, old.ControlMaxRequest}, []any{s.ControlGroup, s.ControlIdleTimeout, s.ControlMaxRequest})
	check("drivers.process", old.Process, s.Process)
	check("drivers.incus", old.Incus, s.Incus)
	check("edge.listen", old.EdgeListen, s.EdgeListen)
	check("metrics.listen", old.MetricsListen, s.MetricsListen)
	check("supervision", []any{old.Strategy, old.MaxRestarts, old.Period}, []any{s.Strategy, s.MaxRestarts, s.Period})
	return out
}

// LoadConfig reads and resolves a daemon config file; dataDir, when set,
// is the --data-dir flag. chaosBuild says the daemon has fault hooks
// (Options.Hooks): without them chaos.enabled: true is a config error.
func LoadConfig(path, dataDir string, chaosBuild bool) (Settings, daemonconfig.Digest, error) {
	c, dg, err := daemonconfig.LoadWith(path, daemonconfig.Overrides{DataDir: dataDir, ChaosBuild: chaosBuild})
	if err != nil {
		return DefaultSettings(), dg, err
	}
	return SettingsFrom(c), dg, nil
}
