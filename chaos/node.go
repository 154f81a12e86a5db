package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/lifecycle"
)

// node is one daemon the campaign runs: the engenho binary on a config
// and data directory of its own, restarted as the faults require.
type node struct {
	name   string
	bin    string
	dir    string // holds config.yaml, data/, daemon.log
	config []byte // the good config
	env    []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited
	client *control.Client
	pid    int
}

func (n *node) configPath() string { return filepath.Join(n.dir, "config.yaml") }
func (n *node) dataDir() string    { return filepath.Join(n.dir, "data") }
func (n *node) logPath() string    { return filepath.Join(n.dir, "daemon.log") }
func (n *node) socket() string     { return filepath.Join(n.dataDir(), "control", "engenho.sock") }

// daemonEnv is the campaign's environment without any ENGENHO_ variable
// (they would override the config, DMN-15), plus extra.
func daemonEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ENGENHO_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// writeConfig writes the good config back.
func (n *node) writeConfig() error {
	return os.WriteFile(n.configPath(), n.config, 0o600)
}

// start launches the daemon and waits until its runtime runs.
func (n *node) start(ctx context.Context) error {
	if err := n.launch(); err != nil {
		return err
	}
	return n.waitRunning(ctx, 90*time.Second)
}

// launch starts the daemon process without waiting for it.
func (n *node) launch() error {
	logf, err := os.OpenFile(n.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.name, err)
	}
	defer logf.Close()
	cmd := exec.Command(n.bin, "daemon", "--config", n.configPath(), "--data-dir", n.dataDir(), "--log-format", "json")
	cmd.Env = n.env
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C of the campaign reaches the campaign,
	// which stops its daemons itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("node %s: starting %s: %w", n.name, n.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	n.mu.Lock()
	n.cmd, n.done, n.pid = cmd, done, cmd.Process.Pid
	n.mu.Unlock()
	return nil
}

// currentPid is the pid of the daemon process last launched.
func (n *node) currentPid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pid
}

// alive reports whether the daemon process runs.
func (n *node) alive() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// waitRunning polls status until the lifecycle is running.
func (n *node) waitRunning(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		if !n.alive() {
			return fmt.Errorf("node %s: the daemon exited (see %s)", n.name, n.logPath())
		}
		st, err := n.status(ctx)
		if err == nil && st.Daemon.Lifecycle.Name == lifecycle.Running {
			return nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = "lifecycle " + string(st.Daemon.Lifecycle.Name)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("node %s: not running after %s: %s", n.name, limit, last)
}

// running is one look: nil when the daemon's runtime runs.
func (n *node) running(ctx context.Context) error {
	if !n.alive() {
		return fmt.Errorf("node %s: the daemon exited (see %s)", n.name, n.logPath())
	}
	st, err := n.status(ctx)
	if err != nil {
		return err
	}
	if st.Daemon.Lifecycle.Name != lifecycle.Running {
		return fmt.Errorf("node %s: lifecycle %s", n.name, st.Daemon.Lifecycle.Name)
	}
	return nil
}

// kill sends SIGKILL to the daemon and waits for it to be gone.
func (n *node) kill() error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.dropClientLocked()
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("node %s: SIGKILL: %w", n.name, err)
	}
	<-done
	return nil
}

// relaunch ends the daemon with stop (nil: SIGKILL), runs down while it
// is down (nil: nothing), and starts it again; the fault has taken effect
// once a new pid answers (inj.witness). It returns the pid it ended. When
// stop or down fails it returns that error and starts nothing: a down
// that wants the daemon back after its own failure launches it itself.
func (n *node) relaunch(inj *injected, stop, down func() error) (old int, err error) {
	if stop == nil {
		stop = n.kill
	}
	old = n.currentPid()
	if err := stop(); err != nil {
		return old, err
	}
	if down != nil {
		if err := down(); err != nil {
			return old, err
		}
	}
	if err := n.launch(); err != nil {
		return old, err
	}
	inj.witness = func(o observation) bool { return o.status.Daemon.PID != old }
	return old, nil
}

// exit asks the daemon to drain and exit, killing it if it does not within
// limit.
func (n *node) exit(ctx context.Context, limit time.Duration) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil || !n.alive() {
		return nil
	}
	_ = n.call(ctx, func(ctx context.Context, c *control.Client) error {
		_, err := c.Exit(ctx)
		return err
	})
	select {
	case <-done:
		n.mu.Lock()
		n.dropClientLocked()
		n.mu.Unlock()
		return nil
	case <-time.After(limit):
		_ = n.kill()
		return fmt.Errorf("node %s: did not exit within %s; killed", n.name, limit)
	}
}

func (n *node) dropClientLocked() {
	if n.client != nil {
		_ = n.client.Close()
		n.client = nil
	}
}

// call runs fn on the node's connection, dialling it when needed. A
// failure that is not the daemon's answer drops the connection, so the
// next call dials again.
func (n *node) call(ctx context.Context, fn func(ctx context.Context, c *control.Client) error) error {
	n.mu.Lock()
	c := n.client
	if c == nil {
		var err error
		c, err = control.Dial(n.socket())
		if err != nil {
			n.mu.Unlock()
			return err
		}
		n.client = c
	}
	n.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := fn(cctx, c)
	var answered *control.Error
	if err != nil && !errors.As(err, &answered) {
		n.mu.Lock()
		if n.client == c {
			n.dropClientLocked()
		}
		n.mu.Unlock()
	}
	return err
}

func (n *node) status(ctx context.Context) (control.StatusResult, error) {
	var res control.StatusResult
	err := n.call(ctx, func(ctx context.Context, c *control.Client) error {
		var err error
		res, err = c.Status(ctx, control.StatusArgs{})
		return err
	})
	return res, err
}

func (n *node) chaos(ctx context.Context, args control.ChaosArgs) (control.ChaosResult, error) {
	var res control.ChaosResult
	err := n.call(ctx, func(ctx context.Context, c *control.Client) error {
		var err error
		res, err = c.Chaos(ctx, args)
		return err
	})
	return res, err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// events reads the last n events of n's journal.
func (n *node) events(ctx context.Context, last int) ([]messages.Event, error) {
	var out []messages.Event
	err := n.call(ctx, func(ctx context.Context, c *control.Client) error {
		out = out[:0]
		_, err := c.Events(ctx, control.EventsArgs{Tail: last}, func(ev messages.Event) error {
			out = append(out, ev)
			return nil
		})
		return err
	})
	return out, err
}
