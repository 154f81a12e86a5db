package sdnotify

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// listen opens a unixgram socket standing in for systemd's.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// receive reads one datagram. Delivery on a local unixgram socket happens
// inside the sender's write, so it is already queued; the deadline only
// keeps a broken test from hanging.
func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, _, err := conn.ReadFromUnix(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

// TestNotifyPathSocket: READY=1, STOPPING=1, STATUS=..., WATCHDOG=1 reach a
// socket named by path (DMN-18).
func TestNotifyPathSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn := listen(t, path)
	n := New(path, 30*time.Second)
	checkMessages(t, n, conn)
}

// TestNotifyAbstractSocket: the same through an abstract socket (@name).
func TestNotifyAbstractSocket(t *testing.T) {
	name := fmt.Sprintf("@engenho-sdnotify-test-%d-%d", os.Getpid(), rand.Uint64())
	conn := listen(t, name)
	n := New(name, 30*time.Second)
	checkMessages(t, n, conn)
}

func checkMessages(t *testing.T, n *Notifier, conn *net.UnixConn) {
	t.Helper()
	steps := []struct {
		send func() error
		want string
	}{
		{n.Ready, "READY=1"},
		{func() error { return n.Status("running: 3 stacks\n12 replicas") }, "STATUS=running: 3 stacks 12 replicas"},
		{n.Watchdog, "WATCHDOG=1"},
		{n.Stopping, "STOPPING=1"},
		{func() error { return n.Notify("STATUS=draining", "STOPPING=1") }, "STATUS=draining\nSTOPPING=1"},
	}
	for _, s := range steps {
		if err := s.send(); err != nil {
			t.Fatal(err)
		}
		if got := receive(t, conn); got != s.want {
			t.Fatalf("got %q, want %q", got, s.want)
		}
	}
}

// TestNoSocketIsNoop: without NOTIFY_SOCKET nothing is sent and nothing
// fails (DMN-18).
func TestNoSocketIsNoop(t *testing.T) {
	for _, n := range []*Notifier{nil, {}, New("", time.Second)} {
		if n.Enabled() {
			t.Fatal("enabled without a socket")
		}
		for _, f := range []func() error{n.Ready, n.Stopping, n.Watchdog, func() error { return n.Status("x") }} {
			if err := f(); err != nil {
				t.Fatal(err)
			}
		}
		if _, ok := n.WatchdogInterval(); ok {
			t.Fatal("watchdog on without a socket")
		}
	}
}

// TestWatchdogOnlyWhenAsked: without WATCHDOG_USEC, Watchdog sends nothing
// (DMN-18). The next datagram on the socket is the READY sent after it.
func TestWatchdogOnlyWhenAsked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	conn := listen(t, path)
	n := New(path, 0)
	if err := n.Watchdog(); err != nil {
		t.Fatal(err)
	}
	if err := n.Ready(); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, conn); got != "READY=1" {
		t.Fatalf("first datagram %q: Watchdog sent without WATCHDOG_USEC", got)
	}
}

func TestSendFailureIsReported(t *testing.T) {
	n := New(filepath.Join(t.TempDir(), "nobody-listens"), 0)
	if err := n.Ready(); err == nil {
		t.Fatal("sending to a missing socket succeeded")
	}
}

// TestParseEnv: NOTIFY_SOCKET forms, WATCHDOG_USEC and WATCHDOG_PID.
func TestParseEnv(t *testing.T) {
	const pid = 4242
	cases := []struct {
		name     string
		env      map[string]string
		socket   string
		watchdog time.Duration
		wantErr  bool
	}{
		{"unset", nil, "", 0, false},
		{"path", map[string]string{EnvSocket: "/run/systemd/notify"}, "/run/systemd/notify", 0, false},
		{"abstract", map[string]string{EnvSocket: "@sd"}, "@sd", 0, false},
		{"relative path", map[string]string{EnvSocket: "notify"}, "", 0, true},
		{"vsock", map[string]string{EnvSocket: "vsock:2:1234"}, "", 0, true},
		{"watchdog for us", map[string]string{EnvSocket: "@sd", EnvWatchdogUsec: "30000000", EnvWatchdogPid: "4242"}, "@sd", 30 * time.Second, false},
		{"watchdog without pid", map[string]string{EnvSocket: "@sd", EnvWatchdogUsec: "500000"}, "@sd", 500 * time.Millisecond, false},
		{"watchdog for another pid", map[string]string{EnvSocket: "@sd", EnvWatchdogUsec: "30000000", EnvWatchdogPid: "1"}, "@sd", 0, false},
		{"bad usec", map[string]string{EnvSocket: "@sd", EnvWatchdogUsec: "soon"}, "@sd", 0, true},
		{"zero usec", map[string]string{EnvSocket: "@sd", EnvWatchdogUsec: "0"}, "@sd", 0, true},
		{"bad pid", map[string]string{EnvSocket: "@sd", EnvWatchdogUsec: "1", EnvWatchdogPid: "x"}, "@sd", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, err := parseEnv(func(k string) string { return c.env[k] }, pid)
			if (err != nil) != c.wantErr {
				t.Fatalf("err %v, want error %v", err, c.wantErr)
			}
			if n.socket != c.socket || n.watchdog != c.watchdog {
				t.Fatalf("got socket %q watchdog %s", n.socket, n.watchdog)
			}
		})
	}
}

// TestFromEnvUnsets: FromEnv reads the environment, then removes it so
// workloads do not inherit it; the watchdog interval is half the timeout.
func TestFromEnvUnsets(t *testing.T) {
	t.Setenv(EnvSocket, "@engenho-test")
	t.Setenv(EnvWatchdogUsec, "20000000")
	t.Setenv(EnvWatchdogPid, fmt.Sprint(os.Getpid()))
	n, err := FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if timeout, ok := n.WatchdogTimeout(); !ok || timeout != 20*time.Second {
		t.Fatalf("timeout %s, %v", timeout, ok)
	}
	if interval, ok := n.WatchdogInterval(); !ok || interval != 10*time.Second {
		t.Fatalf("interval %s, %v", interval, ok)
	}
	for _, k := range []string{EnvSocket, EnvWatchdogUsec, EnvWatchdogPid} {
		if v, set := os.LookupEnv(k); set {
			t.Errorf("%s still set to %q", k, v)
		}
	}
}
