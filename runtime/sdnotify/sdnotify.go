package sdnotify

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// The environment variables systemd sets for a Type=notify service.
const (
	EnvSocket       = "NOTIFY_SOCKET"
	EnvWatchdogUsec = "WATCHDOG_USEC"
	EnvWatchdogPid  = "WATCHDOG_PID"
)

// Notifier sends notifications to systemd. The zero value (and any Notifier
// without a socket) does nothing.
type Notifier struct {
	socket   string
	watchdog time.Duration
}

// New returns a notifier for socket ("" disables it) with the watchdog
// timeout systemd set (0: no watchdog).
func New(socket string, watchdog time.Duration) *Notifier {
	return &Notifier{socket: socket, watchdog: max(watchdog, 0)}
}

// FromEnv reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID, then unsets
// them so that workloads the daemon starts do not inherit them (a workload
// must not be able to ping the daemon's watchdog or report it ready). The
// notifier is never nil; an error says what in the environment was
// unusable, and that part is disabled.
func FromEnv() (*Notifier, error) {
	n, err := parseEnv(os.Getenv, os.Getpid())
	for _, k := range []string{EnvSocket, EnvWatchdogUsec, EnvWatchdogPid} {
		os.Unsetenv(k)
	}
	return n, err
}

// parseEnv builds a notifier from an environment, for process pid.
func parseEnv(getenv func(string) string, pid int) (*Notifier, error) {
	n := &Notifier{}
	var errs []error
	switch socket := getenv(EnvSocket); {
	case socket == "":
	case strings.HasPrefix(socket, "/") || strings.HasPrefix(socket, "@"):
		n.socket = socket
	default:
		errs = append(errs, fmt.Errorf("sdnotify: %s=%q: only absolute paths and @abstract names are supported", EnvSocket, socket))
	}
	wd, err := parseWatchdog(getenv(EnvWatchdogUsec), getenv(EnvWatchdogPid), pid)
	if err != nil {
		errs = append(errs, err)
	}
	n.watchdog = wd
	return n, errors.Join(errs...)
}

// parseWatchdog returns the watchdog timeout meant for pid, or 0.
func parseWatchdog(usec, forPid string, pid int) (time.Duration, error) {
	if usec == "" {
		return 0, nil
	}
	if forPid != "" {
		p, err := strconv.Atoi(forPid)
		if err != nil {
			return 0, fmt.Errorf("sdnotify: %s=%q: %w", EnvWatchdogPid, forPid, err)
		}
		if p != pid {
			return 0, nil // meant for another process
		}
	}
	us, err := strconv.ParseInt(usec, 10, 64)
	if err != nil || us <= 0 {
		return 0, fmt.Errorf("sdnotify: %s=%q: not a positive number of microseconds", EnvWatchdogUsec, usec)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// Enabled reports whether notifications are sent anywhere.
func (n *Notifier) Enabled() bool { return n != nil && n.socket != "" }

// Ready sends READY=1: the runtime is running.
func (n *Notifier) Ready() error { return n.Notify("READY=1") }

// Stopping sends STOPPING=1: the daemon is draining to exit.
func (n *Notifier) Stopping() error { return n.Notify("STOPPING=1") }

// Status sends STATUS=text, shown by systemctl status. Newlines (which
// would start a new assignment) become spaces.
func (n *Notifier) Status(text string) error {
	return n.Notify("STATUS=" + strings.ReplaceAll(text, "\n", " "))
}

// Watchdog sends WATCHDOG=1 if systemd asked for watchdog pings; otherwise
// it does nothing.
func (n *Notifier) Watchdog() error {
	if _, ok := n.WatchdogTimeout(); !ok {
		return nil
	}
	return n.Notify("WATCHDOG=1")
}

// WatchdogTimeout is systemd's watchdog timeout (WATCHDOG_USEC) if it is
// meant for this process.
func (n *Notifier) WatchdogTimeout() (time.Duration, bool) {
	if !n.Enabled() || n.watchdog <= 0 {
		return 0, false
	}
	return n.watchdog, true
}

// WatchdogInterval is how often to call Watchdog: half the timeout, as
// systemd recommends, so one late ping is not fatal.
func (n *Notifier) WatchdogInterval() (time.Duration, bool) {
	d, ok := n.WatchdogTimeout()
	return d / 2, ok
}

// Notify sends assignments ("KEY=value") in one datagram. Without a socket
// it does nothing.
func (n *Notifier) Notify(assignments ...string) error {
	if !n.Enabled() || len(assignments) == 0 {
		return nil
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("sdnotify: %s: %w", n.socket, err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(strings.Join(assignments, "\n"))); err != nil {
		return fmt.Errorf("sdnotify: %s: %w", n.socket, err)
	}
	return nil
}
