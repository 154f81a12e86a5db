package daemonconfig

import (
	"reflect"
	"strings"
)

// Changes is what differs between two configs, by how each change takes
// effect (DMN-16). Keys are dotted names ("edge.listen"), in file order.
type Changes struct {
	// InPlace keys the running daemon applies now: stacks, log.level,
	// sweep, probe, drain and boot timings.
	InPlace []string
	// Restart keys take effect at the next boot of the runtime (`engenho
	// restart`): drivers, objstore, edge, supervision, journal, chaos,
	// node.
	Restart []string
	// Relaunch keys take effect only when the daemon process restarts:
	// data_dir, control, log.format, metrics.
	Relaunch []string
	// StacksAdded and StacksRemoved compare the resolved stack files of
	// the two configs. A stack file whose content changed is not here: the
	// watcher's Event names it.
	StacksAdded   []string
	StacksRemoved []string
}

// Empty reports whether nothing changed.
func (c Changes) Empty() bool {
	return len(c.InPlace) == 0 && len(c.Restart) == 0 && len(c.Relaunch) == 0 &&
		len(c.StacksAdded) == 0 && len(c.StacksRemoved) == 0
}

// NeedRestart lists the changed keys that the running daemon cannot apply
// (Restart then Relaunch), for a report such as "restart needed:
// edge.listen".
func (c Changes) NeedRestart() []string {
	return append(append([]string(nil), c.Restart...), c.Relaunch...)
}

// String is a one-line summary for logs and events; it names keys, never
// values, so it is safe with secrets.
func (c Changes) String() string {
	var parts []string
	add := func(label string, keys []string) {
		if len(keys) > 0 {
			parts = append(parts, label+": "+strings.Join(keys, ", "))
		}
	}
	add("applied", c.InPlace)
	add("restart needed", c.Restart)
	add("relaunch needed", c.Relaunch)
	add("stacks added", c.StacksAdded)
	add("stacks removed", c.StacksRemoved)
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, "; ")
}

// Diff compares old and new key by key. A change of stacks (the patterns,
// or the files they resolved to) is in place; StacksAdded/StacksRemoved
// say which files.
func Diff(old, new *Config) Changes {
	var ch Changes
	for _, l := range schema().leaves {
		if sameValue(l.field(old), l.field(new)) {
			continue
		}
		switch l.reload {
		case Live:
			ch.InPlace = append(ch.InPlace, l.key)
		case Relaunch:
			ch.Relaunch = append(ch.Relaunch, l.key)
		default:
			ch.Restart = append(ch.Restart, l.key)
		}
	}
	ch.StacksAdded, ch.StacksRemoved = StackDiff(old.StackFiles, new.StackFiles)
	if (len(ch.StacksAdded) > 0 || len(ch.StacksRemoved) > 0) && !contains(ch.InPlace, "stacks") {
		ch.InPlace = append(ch.InPlace, "stacks")
	}
	return ch
}

// sameValue compares two values of a key; an empty list equals a nil one.
func sameValue(a, b reflect.Value) bool {
	if a.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0 {
		return true
	}
	return reflect.DeepEqual(a.Interface(), b.Interface())
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
