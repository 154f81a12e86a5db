package daemon_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

const keepStack = `name: keep
services:
  idle:
    command: ["/bin/sh", "-c", "exec sleep 100000"]
    stop_grace_period: 1s
`

// events returns the events after seq.
func (n *node) events(after uint64) []messages.Event {
	n.t.Helper()
	c, err := n.client()
	if err != nil {
		n.t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []messages.Event
	if _, err := c.Events(ctx, control.EventsArgs{Since: after}, func(e messages.Event) error {
		out = append(out, e)
		return nil
	}); err != nil {
		n.t.Fatal(err)
	}
	return out
}

func (n *node) lastSeq() uint64 {
	evs := n.events(0)
	if len(evs) == 0 {
		return 0
	}
	return evs[len(evs)-1].Seq
}

// reloadVerdict waits for the reload that a trigger started to report,
// and returns the config.* events since after.
func (n *node) reloadVerdict(after uint64) []messages.Event {
	n.t.Helper()
	var got []messages.Event
	n.eventually("a config.* event", 30*time.Second, func() bool {
		got = nil
		for _, e := range n.events(after) {
			if strings.HasPrefix(e.Kind, "config.") {
				got = append(got, e)
			}
		}
		return len(got) > 0
	})
	time.Sleep(500 * time.Millisecond) // room for a second, wrong, event
	got = nil
	for _, e := range n.events(after) {
		if strings.HasPrefix(e.Kind, "config.") {
			got = append(got, e)
		}
	}
	return got
}

// DMN-16: a reload that meets an invalid stack file listed in the config
// is rejected as a whole: the one event is config.rejected naming the
// file, line and key, never config.reloaded beside it, and the stack keeps
// its deployment. The same for each trigger: the file watch, SIGHUP and
// `engenho reconfigure`, which also prints the error and exits 1. Fixed,
// the next reconfigure reports config.reloaded only and what it applied.
func TestDMN16RejectedReloadEmitsOnlyRejected(t *testing.T) {
	n := newNode(t)
	path := n.writeFile("keep.yaml", keepStack)
	n.writeConfig(path)
	n.start("running")
	n.eventually("keep/idle converged", 60*time.Second, func() bool { return converged(n.service("keep", "idle")) })
	deployment := n.service("keep", "idle").Deployment

	onlyRejected := func(t *testing.T, evs []messages.Event) {
		t.Helper()
		if len(evs) != 1 || evs[0].Kind != messages.KindConfigRejected {
			t.Fatalf("want exactly one config.rejected, got %+v", evs)
		}
		if !strings.Contains(evs[0].Message, "keep.yaml:6: services.idle.bogus: unknown key") {
			t.Errorf("the event does not say what and where: %q", evs[0].Message)
		}
		if s := n.service("keep", "idle"); s.Deployment != deployment {
			t.Errorf("the rejected reload changed the deployment: %s, was %s", s.Deployment, deployment)
		}
	}
	bad := strings.Replace(keepStack, "    stop_grace_period: 1s\n", "    stop_grace_period: 1s\n    bogus: 1\n", 1)

	t.Run("watch", func(t *testing.T) {
		last := n.lastSeq()
		n.writeFile("keep.yaml", bad)
		onlyRejected(t, n.reloadVerdict(last))
	})
	t.Run("sighup", func(t *testing.T) {
		last := n.lastSeq()
		if err := n.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		onlyRejected(t, n.reloadVerdict(last))
	})
	t.Run("reconfigure", func(t *testing.T) {
		last := n.lastSeq()
		out, code := n.cli("reconfigure")
		if code != 1 || strings.Contains(out, "accepted") || !strings.Contains(out, "keep.yaml:6: services.idle.bogus: unknown key") {
			t.Errorf("reconfigure on an invalid stack file: exit %d\n%s", code, out)
		}
		onlyRejected(t, n.reloadVerdict(last))
	})
	t.Run("config file", func(t *testing.T) {
		last := n.lastSeq()
		n.writeFile("keep.yaml", keepStack)
		n.reloadVerdict(last) // the watch's reload of the fixed stack file goes first
		last = n.lastSeq()
		n.extra = "probe: {intervl: 2s}\n"
		n.writeConfig(path)
		n.extra = ""
		if evs := n.reloadVerdict(last); len(evs) != 1 || evs[0].Kind != messages.KindConfigRejected || !strings.Contains(evs[0].Message, "probe.intervl") {
			t.Errorf("the watch on a broken config: want one config.rejected naming the key, got %+v", evs)
		}
		last = n.lastSeq()
		if out, code := n.cli("reconfigure"); code != 1 || strings.Contains(out, "accepted") || !strings.Contains(out, "probe.intervl") {
			t.Errorf("reconfigure on a broken config: exit %d\n%s", code, out)
		}
		if evs := n.reloadVerdict(last); len(evs) != 1 || evs[0].Kind != messages.KindConfigRejected {
			t.Errorf("reconfigure on a broken config: want one config.rejected, got %+v", evs)
		}
		last = n.lastSeq()
		n.writeConfig(path)
		n.writeFile("keep.yaml", bad)
		n.eventually("the bad stack file rejected again", 30*time.Second, func() bool {
			evs := n.events(last)
			return len(evs) > 0 && evs[len(evs)-1].Kind == messages.KindConfigRejected
		})
	})
	t.Run("fixed", func(t *testing.T) {
		last := n.lastSeq()
		n.writeFile("keep.yaml", strings.Replace(keepStack, "100000", "100001", 1))
		evs := n.reloadVerdict(last)
		if len(evs) != 1 || evs[0].Kind != messages.KindConfigReloaded || !strings.Contains(evs[0].Message, "stack keep: idle update") {
			t.Errorf("the watch on a fixed file: want exactly one config.reloaded naming the update, got %+v", evs)
		}
		n.eventually("the fixed file applied", 30*time.Second, func() bool { return n.service("keep", "idle").Deployment != deployment })
		last = n.lastSeq()
		out, code := n.cli("reconfigure")
		if code != 0 || !strings.Contains(out, "config reloaded") || !strings.Contains(out, "nothing to apply in place") {
			t.Errorf("reconfigure with nothing new: exit %d\n%s", code, out)
		}
		if evs := n.reloadVerdict(last); len(evs) != 1 || evs[0].Kind != messages.KindConfigReloaded {
			t.Errorf("reconfigure: want exactly one config.reloaded, got %+v", evs)
		}
	})
}
