package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// incusdRestart says how a restart of incusd went.
type incusdRestart struct {
	OldPid, NewPid int
	// Stopped is from the signal until the old incusd was gone; Took from
	// the signal until the new one answered on its socket.
	Stopped, Took time.Duration
}

// How long a restart may take: incusd's clean exit (SIGTERM: it closes its
// connections and leaves its instances running) and its start. Variables
// so the tests need not wait them out.
var (
	incusdStopWait  = 30 * time.Second // then SIGKILL
	incusdReadyWait = 2 * time.Minute
	incusdPoll      = 50 * time.Millisecond
)

// restartIncusd restarts the incusd answering on socket (the one
// drivers/incus/setup.sh starts: `nohup /usr/libexec/incus/incusd --group
// root`, no service manager), mid-operation if need be: it stops it with
// sig (SIGTERM: a clean exit; SIGKILL: a crash, which leaves the socket
// file behind), starts it again exactly as it was started (its argv,
// environment, output file and open-files limit, read from /proc), in a
// session of its own so the campaign's Ctrl-C or exit does not take it
// along, and waits until the new one answers. Running containers survive
// either way (docs/drivers.md, "incusd restarts").
func restartIncusd(ctx context.Context, socket string, sig syscall.Signal) (incusdRestart, error) {
	var r incusdRestart
	pid, err := incusdPid(ctx, socket)
	if err != nil {
		return r, fmt.Errorf("restarting incusd: %w", err)
	}
	was, err := readIncusdProc(pid)
	if err != nil {
		return r, fmt.Errorf("restarting incusd (pid %d): %w", pid, err)
	}
	r.OldPid = pid
	began := time.Now()
	if err := syscall.Kill(pid, sig); err != nil {
		return r, fmt.Errorf("restarting incusd: signalling pid %d: %w", pid, err)
	}
	if err := waitGone(ctx, pid, was.started); err != nil {
		return r, fmt.Errorf("restarting incusd: %w", err)
	}
	r.Stopped = time.Since(began)
	cmd, exited, err := was.start()
	if err != nil {
		return r, fmt.Errorf("restarting incusd: %w", err)
	}
	r.NewPid = cmd.Process.Pid
	if err := waitAnswers(ctx, socket, r.NewPid, exited); err != nil {
		return r, fmt.Errorf("restarting incusd: %w (its output goes to %s)", err, was.output)
	}
	r.Took = time.Since(began)
	return r, nil
}

// incusdPid asks incusd on socket for its pid (GET /1.0's
// environment.server_pid).
func incusdPid(ctx context.Context, socket string) (int, error) {
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://incus/1.0", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("incusd does not answer on %s: %w", socket, err)
	}
	defer resp.Body.Close()
	var env struct {
		Metadata struct {
			Environment struct {
				ServerPid int `json:"server_pid"`
			} `json:"environment"`
		} `json:"metadata"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Metadata.Environment.ServerPid == 0 {
		return 0, fmt.Errorf("incusd on %s: GET /1.0 (HTTP %d) names no server_pid (%v)", socket, resp.StatusCode, err)
	}
	return env.Metadata.Environment.ServerPid, nil
}

// incusdProc is how a running incusd was started.
type incusdProc struct {
	argv, env []string
	dir       string
	output    string // the file its stdout and stderr go to
	nofile    *unix.Rlimit
	started   string // its start time (field 22 of /proc/PID/stat), to tell a reused pid
}

func readIncusdProc(pid int) (incusdProc, error) {
	var p incusdProc
	proc := "/proc/" + strconv.Itoa(pid)
	cmdline, err := os.ReadFile(proc + "/cmdline")
	if err != nil {
		return p, err
	}
	p.argv = splitNul(cmdline)
	if len(p.argv) == 0 || filepath.Base(p.argv[0]) != "incusd" || len(p.argv) > 1 && !strings.HasPrefix(p.argv[1], "-") {
		return p, fmt.Errorf("pid %d is not incusd's daemon: %q", pid, p.argv)
	}
	environ, err := os.ReadFile(proc + "/environ")
	if err != nil {
		return p, err
	}
	p.env = splitNul(environ)
	// setup.sh's working directory may be gone ("... (deleted)").
	p.dir = "/"
	if d, err := os.Readlink(proc + "/cwd"); err == nil && !strings.HasSuffix(d, " (deleted)") {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			p.dir = d
		}
	}
	p.output = "/var/log/incus/incusd.log"
	if o, err := os.Readlink(proc + "/fd/1"); err == nil && strings.HasPrefix(o, "/") && !strings.HasSuffix(o, " (deleted)") {
		if st, err := os.Stat(o); err == nil && st.Mode().IsRegular() {
			p.output = o
		}
	}
	var lim unix.Rlimit
	if unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &lim) == nil {
		p.nofile = &lim
	}
	p.started, err = procStart(pid)
	return p, err
}

func splitNul(b []byte) []string {
	var out []string
	for _, s := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		out = append(out, string(s))
	}
	return out
}

// procStart is field 22 (starttime) of /proc/PID/stat, and whether the
// process is a zombie counts as gone.
func procStart(pid int) (string, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// The command name (field 2) may hold spaces: count from its ')'.
	rest := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(rest) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: too short", pid)
	}
	if rest[0] == "Z" {
		return "", os.ErrNotExist
	}
	return rest[19], nil
}

// waitGone waits until pid (started at started) has exited, with SIGKILL
// after incusdStopWait.
func waitGone(ctx context.Context, pid int, started string) error {
	deadline := time.Now().Add(incusdStopWait)
	killed := false
	for {
		if s, err := procStart(pid); err != nil || s != started {
			return nil
		}
		if time.Now().After(deadline) {
			if killed {
				return fmt.Errorf("incusd pid %d still there %s after SIGKILL", pid, incusdStopWait)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed, deadline = true, time.Now().Add(incusdStopWait)
		}
		if err := sleep(ctx, incusdPoll); err != nil {
			return err
		}
	}
}

// start runs incusd again as p describes; exited is closed when it ends
// (it is reaped, so a later restart does not wait on a zombie).
func (p incusdProc) start() (*exec.Cmd, <-chan struct{}, error) {
	out, err := os.OpenFile(p.output, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, err
	}
	defer out.Close()
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = p.env, p.dir, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", p.argv[0], err)
	}
	if p.nofile != nil {
		_ = unix.Prlimit(cmd.Process.Pid, unix.RLIMIT_NOFILE, p.nofile, nil)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return cmd, exited, nil
}

// waitAnswers waits until incusd pid answers on socket.
func waitAnswers(ctx context.Context, socket string, pid int, exited <-chan struct{}) error {
	deadline := time.Now().Add(incusdReadyWait)
	for {
		got, err := incusdPid(ctx, socket)
		if err == nil && got == pid {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the new incusd (pid %d) exited while starting", pid)
		default:
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("pid %d answers instead", got)
			}
			return fmt.Errorf("the new incusd (pid %d) does not answer on %s after %s: %w", pid, socket, incusdReadyWait, err)
		}
		if err := sleep(ctx, incusdPoll); err != nil {
			return err
		}
	}
}
