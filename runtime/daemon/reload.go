package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/engenho/engenho/configs/daemonconfig"
	"github.com/engenho/engenho/configs/stackfile"
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

// reloadOutcome is what one reload did (DMN-16), for the reconfigure
// request that asked for it. Rejected non-empty means nothing changed.
type reloadOutcome struct {
	Applied      []string
	NeedsRestart []string
	Rejected     []string
}

// reconfigure re-reads the config and the stack files it lists and applies
// in place what can be applied; what needs a restart is reported (DMN-16).
// Every trigger (the file watch, SIGHUP, `engenho reconfigure`) comes
// here. A reload is all or nothing: if the config or any listed stack file
// does not load or validate, nothing changes and the one event is
// config.rejected, naming every error; otherwise the one event is
// config.reloaded. reply, when set, gets the outcome.
func (d *Daemon) reconfigure(reply chan<- reloadOutcome) {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	out := d.reload()
	if len(out.Rejected) > 0 {
		d.log.Error().Strs("errors", out.Rejected).Msg("config refused; keeping the running one")
		d.postEmit(messages.KindConfigRejected, messages.LevelError, rejectedMessage(out.Rejected))
	} else {
		d.postEmit(messages.KindConfigReloaded, messages.LevelInfo, reloadedMessage(out))
	}
	if reply != nil {
		reply <- out
	}
}

func (d *Daemon) reload() reloadOutcome {
	s, dg, err := d.opts.Load(d.opts.ConfigPath, d.opts.DataDir)
	if err != nil {
		return reloadOutcome{Rejected: []string{strings.TrimSpace(err.Error())}}
	}
	rt := d.rt.Load()
	stacks, errs := checkStackFiles(rt, s.StackFiles)
	if len(errs) > 0 {
		return reloadOutcome{Rejected: errs}
	}
	old := d.swapSettings(s, dg)
	out := reloadOutcome{NeedsRestart: restartNeeded(old, s)}
	if old.Config != nil && s.Config != nil {
		for _, k := range daemonconfig.Diff(old.Config, s.Config).InPlace {
			if k != "stacks" {
				out.Applied = append(out.Applied, k)
			}
		}
	}
	if rt != nil {
		out.Applied = append(out.Applied, d.applyStacks(rt, stacks, s.StackFiles)...)
	}
	return out
}

// swapSettings makes s the running settings in the loop and returns the
// ones it replaced; the data directory stays (it needs a relaunch).
func (d *Daemon) swapSettings(s Settings, dg daemonconfig.Digest) Settings {
	done := make(chan Settings, 1)
	d.in <- input{apply: func() {
		old := d.settings
		s.DataDir = old.DataDir
		d.setSettings(s, dg)
		d.watch.resync()
		d.log.SetLevel(s.LogLevel)
		done <- old
	}}
	return <-done
}

// listedStack is a stack file the config lists, parsed and validated.
type listedStack struct {
	path  string
	stack *stackfile.Stack
}

// checkStackFiles parses every listed stack file and, while the runtime
// runs, validates each as a dry run (SVC-2). It returns every error, not
// only the first (SVC-1): a file that does not parse still has its
// well-formed services checked against the node (stackfile.ValidateRest),
// two files that declare the same stack are refused, and so are two that
// would publish one port or share an edge host (stackfile.ValidateTogether).
// Only the stacks without an error are returned.
func checkStackFiles(rt *runtime, paths []string) ([]listedStack, []string) {
	ctx := context.Background()
	var parsed []listedStack
	var errs []string
	var reported []error
	refused := map[string]bool{}
	from := map[string]string{}
	for _, path := range paths {
		st, err := stackfile.ParseFile(path)
		if err != nil && rt != nil {
			err = stackfile.ValidateRest(ctx, err, rt.deployer.node)
		}
		if err == nil && from[st.Name] != "" {
			err = fmt.Errorf("stack file %s: stack %q is also declared in %s", path, st.Name, from[st.Name])
			st = nil // its stack is the first file's
		}
		if st != nil {
			from[st.Name] = path
			parsed = append(parsed, listedStack{path: path, stack: st})
		}
		if err == nil && rt != nil {
			_, err = rt.deployer.Apply(ctx, st, path, true, nil)
		}
		if err != nil {
			errs = append(errs, strings.TrimSpace(err.Error()))
			reported = append(reported, err)
			if st != nil {
				refused[st.Name] = true
			}
		}
	}
	stacks := make([]*stackfile.Stack, len(parsed))
	for i, ls := range parsed {
		stacks[i] = ls.stack
	}
	for _, ve := range together(stacks, reported) {
		errs = append(errs, strings.TrimSpace(ve.Error()))
		refused[ve.Stack] = true
	}
	var ok []listedStack
	for _, ls := range parsed {
		if !refused[ls.stack.Name] {
			ok = append(ok, ls)
		}
	}
	return ok, errs
}

// together is stackfile.ValidateTogether over stacks, less what the other
// checks already reported of the same stack and key: a port that a
// deployed stack publishes is refused for another by the node check and
// by this one, and is said once.
func together(stacks []*stackfile.Stack, reported []error) []*stackfile.ValidationError {
	said := map[string]bool{}
	for _, err := range reported {
		var ve *stackfile.ValidationError
		if errors.As(err, &ve) {
			for _, p := range ve.Problems {
				said[ve.Stack+"\x00"+p.Key] = true
			}
		}
	}
	var out []*stackfile.ValidationError
	for _, err := range stackfile.ValidateTogether(stacks) {
		var ve *stackfile.ValidationError
		if !errors.As(err, &ve) {
			continue
		}
		left := &stackfile.ValidationError{Stack: ve.Stack}
		for _, p := range ve.Problems {
			if !said[ve.Stack+"\x00"+p.Key] {
				left.Problems = append(left.Problems, p)
			}
		}
		if len(left.Problems) > 0 {
			out = append(out, left)
		}
	}
	return out
}

// applyStacks records the checked stacks and removes the stacks whose file
// is not among paths (the config no longer lists it). It returns what
// changed, one line per stack.
func (d *Daemon) applyStacks(rt *runtime, stacks []listedStack, paths []string) []string {
	var applied []string
	listed := map[string]bool{}
	for _, p := range paths {
		listed[p] = true
	}
	for _, ls := range stacks {
		a, err := rt.deployer.reloadApply(context.Background(), ls.stack, ls.path)
		// What the apply did to the operators' overrides (SVC-23): kept,
		// or dropped (each drop is also an override.dropped event).
		for _, note := range a.Notes {
			d.log.Info().Str("file", ls.path).Str("stack", ls.stack.Name).Msg(note)
		}
		if err != nil {
			// Validated a moment ago: only a concurrent change gets here.
			d.log.Error().Err(err).Str("file", ls.path).Msg("stack file refused after it validated")
			applied = append(applied, fmt.Sprintf("stack %s: refused: %s", ls.stack.Name, oneLine(err.Error())))
			continue
		}
		if line := changeLine(ls.stack.Name, a.Changes); line != "" {
			applied = append(applied, line)
		}
	}
	return append(applied, d.removeUnlisted(rt, listed)...)
}

// removeUnlisted removes every stack that came from a file the config no
// longer lists.
func (d *Daemon) removeUnlisted(rt *runtime, listed map[string]bool) []string {
	var removed []string
	for _, st := range rt.deployer.Sources() {
		if !strings.HasPrefix(st.source, "/") || listed[st.source] {
			continue
		}
		d.log.Info().Str("stack", st.stack).Str("file", st.source).Msg("stack file no longer listed; removing the stack")
		if _, err := rt.deployer.Remove(st.stack, self()); err != nil {
			d.log.Error().Err(err).Str("stack", st.stack).Msg("removing an unlisted stack")
			continue
		}
		removed = append(removed, fmt.Sprintf("stack %s: removed (%s is no longer listed)", st.stack, st.source))
	}
	return removed
}

// changeLine is "stack web: api update, worker scale", or empty when
// nothing changed.
func changeLine(stack string, changes []stackfile.Change) string {
	var parts []string
	for _, c := range changes {
		if c.Action != stackfile.ActionUnchanged {
			parts = append(parts, c.Service+" "+string(c.Action))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "stack " + stack + ": " + strings.Join(parts, ", ")
}

func rejectedMessage(errs []string) string {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = oneLine(e)
	}
	return "config reload rejected, nothing changed: " + strings.Join(lines, "; ")
}

func reloadedMessage(out reloadOutcome) string {
	msg := "config reloaded"
	if len(out.Applied) == 0 {
		msg += "; nothing to apply in place"
	} else {
		msg += "; applied: " + strings.Join(out.Applied, "; ")
	}
	if len(out.NeedsRestart) > 0 {
		msg += "; restart needed for " + strings.Join(out.NeedsRestart, ", ")
	}
	return msg
}

// oneLine joins a multi-line error into one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(s), "\n", " | ")), " ")
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
