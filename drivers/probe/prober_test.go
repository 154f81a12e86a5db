package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
)

// execDriver is a drivers.Driver whose only working method is Exec.
type execDriver struct {
	drivers.Driver
	exec func(ctx context.Context, name string, argv []string) (drivers.ExecResult, error)
}

func (d execDriver) Exec(ctx context.Context, name string, argv []string) (drivers.ExecResult, error) {
	return d.exec(ctx, name, argv)
}

// targetFor returns a Target whose only published port 80 is srv's address.
func targetFor(srv *httptest.Server) Target {
	return Target{Instance: "web-1", Addresses: map[int]string{80: srv.Listener.Addr().String()}}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func realProber() *Prober { return NewProber(nil, clock.New()) }

func mustOutcome(t *testing.T, r Result, want Outcome) {
	t.Helper()
	if r.Outcome != want {
		t.Fatalf("outcome %s, want %s (output %q)", r.Outcome, want, r.Output)
	}
}

// SVC-7: an http probe is healthy on 2xx and 3xx, unhealthy otherwise.
func TestHTTPProbeStatusCodes(t *testing.T) {
	for _, c := range []struct {
		code int
		want Outcome
	}{
		{200, Healthy}, {204, Healthy}, {301, Healthy}, {302, Healthy}, {399, Healthy},
		{400, Unhealthy}, {404, Unhealthy}, {500, Unhealthy}, {503, Unhealthy},
	} {
		t.Run(strconv.Itoa(c.code), func(t *testing.T) {
			var gotPath string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath = r.URL.Path
				if c.code >= 300 && c.code < 400 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(c.code)
				w.Write([]byte("body-" + strconv.Itoa(c.code)))
			}))
			defer srv.Close()
			r := realProber().Probe(context.Background(), Config{Kind: KindHTTP, Path: "/healthz"}, targetFor(srv))
			mustOutcome(t, r, c.want)
			if gotPath != "/healthz" {
				t.Fatalf("probed path %q, want /healthz (redirects must not be followed)", gotPath)
			}
			if !strings.Contains(r.Output, strconv.Itoa(c.code)) || (c.code != 204 && !strings.Contains(r.Output, "body-")) {
				t.Fatalf("output %q lacks the status and body", r.Output)
			}
		})
	}
}

// SVC-7: connection refused is unhealthy (the instance does not answer).
func TestHTTPProbeRefusedIsUnhealthy(t *testing.T) {
	addr := closedAddr(t)
	r := realProber().Probe(context.Background(), Config{Kind: KindHTTP}, Target{Addresses: map[int]string{80: addr}})
	mustOutcome(t, r, Unhealthy)
	if !strings.Contains(r.Output, addr) {
		t.Fatalf("output %q does not name %s", r.Output, addr)
	}
}

// SVC-7: a probe that exceeds its timeout is unhealthy and returns at the
// timeout, measured on the injected clock (SUP-19).
func TestHTTPProbeTimeoutIsUnhealthy(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	fake := clock.NewFake(t0)
	p := NewProber(nil, fake)
	done := make(chan Result, 1)
	go func() {
		done <- p.Probe(context.Background(), Config{Kind: KindHTTP, Timeout: 3 * time.Second}, targetFor(srv))
	}()
	if !fake.WaitForTimers(1, 5*time.Second) {
		t.Fatal("probe armed no timeout timer")
	}
	fake.Advance(3 * time.Second)
	r := waitResult(t, done)
	mustOutcome(t, r, Unhealthy)
	if !strings.Contains(r.Output, "timed out after 3s") || r.Duration != 3*time.Second {
		t.Fatalf("output %q duration %s, want a 3s timeout", r.Output, r.Duration)
	}
}

func waitResult(t *testing.T, c <-chan Result) Result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("probe did not return")
		return Result{}
	}
}

// Output is trimmed and bounded to MaxOutput bytes of valid UTF-8.
func TestProbeOutputBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("é", 10000)))
	}))
	defer srv.Close()
	r := realProber().Probe(context.Background(), Config{Kind: KindHTTP}, targetFor(srv))
	mustOutcome(t, r, Healthy)
	if len(r.Output) > MaxOutput || !strings.HasPrefix(r.Output, "HTTP 200 OK") || strings.ContainsRune(r.Output, '\uFFFD') {
		t.Fatalf("output of %d bytes not bounded cleanly: %q...", len(r.Output), r.Output[:40])
	}
	if got := boundOutput("  \n hi \x00\xff  "); got != "hi \x00\uFFFD" {
		t.Fatalf("boundOutput = %q", got)
	}
}

// SVC-7: port selection: the configured target port, else the lowest; a
// missing port means the probe could not run.
func TestProbePortSelection(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer ok.Close()
	dead := closedAddr(t)
	target := Target{Instance: "web-1", Addresses: map[int]string{8080: dead, 80: ok.Listener.Addr().String()}}
	p := realProber()
	mustOutcome(t, p.Probe(context.Background(), Config{Kind: KindHTTP}, target), Healthy)
	mustOutcome(t, p.Probe(context.Background(), Config{Kind: KindHTTP, Port: 8080}, target), Unhealthy)
	r := p.Probe(context.Background(), Config{Kind: KindTCP, Port: 9000}, target)
	mustOutcome(t, r, Error)
	if !strings.Contains(r.Output, "9000") {
		t.Fatalf("output %q does not name the missing port", r.Output)
	}
	mustOutcome(t, p.Probe(context.Background(), Config{Kind: KindTCP}, Target{Instance: "x"}), Error)
}

// SVC-7: a tcp probe is healthy when it connects, unhealthy when refused.
func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := realProber()
	r := p.Probe(context.Background(), Config{Kind: KindTCP}, Target{Addresses: map[int]string{5432: l.Addr().String()}})
	mustOutcome(t, r, Healthy)
	r = p.Probe(context.Background(), Config{Kind: KindTCP}, Target{Addresses: map[int]string{5432: closedAddr(t)}})
	mustOutcome(t, r, Unhealthy)
}

// SVC-7 SUP-14: exec probe: exit 0 healthy, non-zero unhealthy, a driver
// error means it could not run.
func TestExecProbe(t *testing.T) {
	var gotName string
	var gotArgv []string
	reply := func(res drivers.ExecResult, err error) execDriver {
		return execDriver{exec: func(ctx context.Context, name string, argv []string) (drivers.ExecResult, error) {
			gotName, gotArgv = name, argv
			return res, err
		}}
	}
	cfg := Config{Kind: KindExec, Command: []string{"pg_isready", "-q"}}
	target := Target{Instance: "db-1"}
	for _, c := range []struct {
		name   string
		driver execDriver
		want   Outcome
		output string
	}{
		{"exit 0", reply(drivers.ExecResult{Stdout: []byte("ok\n")}, nil), Healthy, "ok"},
		{"exit 1 with output", reply(drivers.ExecResult{ExitCode: 1, Stdout: []byte("no "), Stderr: []byte("db\n")}, nil), Unhealthy, "no db"},
		{"exit 2 silent", reply(drivers.ExecResult{ExitCode: 2}, nil), Unhealthy, "exit code 2"},
		{"driver error", reply(drivers.ExecResult{}, drivers.Errorf("fake", "exec", "db-1", drivers.ErrTransient, "busy")), Error, "could not run"},
		{"instance gone", reply(drivers.ExecResult{}, drivers.Errorf("fake", "exec", "db-1", drivers.ErrNotFound, "")), Error, "not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := NewProber(c.driver, clock.New()).Probe(context.Background(), cfg, target)
			mustOutcome(t, r, c.want)
			if !strings.Contains(r.Output, c.output) {
				t.Fatalf("output %q lacks %q", r.Output, c.output)
			}
			if gotName != "db-1" || !slices.Equal(gotArgv, cfg.Command) {
				t.Fatalf("exec got %s %v", gotName, gotArgv)
			}
		})
	}
}

// SVC-7: an exec probe never blocks past its timeout, even on a driver that
// ignores its context; that counts as unhealthy.
func TestExecProbeTimeoutOnHungDriver(t *testing.T) {
	unblock := make(chan struct{})
	defer close(unblock)
	hung := execDriver{exec: func(context.Context, string, []string) (drivers.ExecResult, error) {
		<-unblock // ignores ctx on purpose
		return drivers.ExecResult{}, nil
	}}
	fake := clock.NewFake(t0)
	done := make(chan Result, 1)
	go func() {
		done <- NewProber(hung, fake).Probe(context.Background(), Config{Kind: KindExec, Command: []string{"true"}, Timeout: time.Second}, Target{})
	}()
	if !fake.WaitForTimers(1, 5*time.Second) {
		t.Fatal("probe armed no timeout timer")
	}
	fake.Advance(time.Second)
	mustOutcome(t, waitResult(t, done), Unhealthy)
}

// SUP-14: a probe abandoned by its caller (replica stopping) could not run.
func TestProbeCanceledByCallerIsError(t *testing.T) {
	started := make(chan struct{})
	d := execDriver{exec: func(ctx context.Context, _ string, _ []string) (drivers.ExecResult, error) {
		close(started)
		<-ctx.Done()
		return drivers.ExecResult{}, ctx.Err()
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Result, 1)
	go func() {
		done <- NewProber(d, clock.NewFake(t0)).Probe(ctx, Config{Kind: KindExec, Command: []string{"true"}}, Target{})
	}()
	<-started
	cancel()
	r := waitResult(t, done)
	mustOutcome(t, r, Error)
	if !strings.Contains(r.Output, "abandoned") {
		t.Fatalf("output %q", r.Output)
	}
}

func TestProbeKindNoneIsError(t *testing.T) {
	mustOutcome(t, realProber().Probe(context.Background(), Config{}, Target{}), Error)
}

func TestConfigDefaultsAndValidate(t *testing.T) {
	d := Config{Kind: KindHTTP}.WithDefaults()
	if d.Interval != 30*time.Second || d.Timeout != 30*time.Second || d.Retries != 3 ||
		d.StartPeriod != 0 || d.StartInterval != 5*time.Second || d.Path != "/" {
		t.Fatalf("defaults %+v", d)
	}
	if (Config{}).WithDefaults().Kind != KindNone || (Config{}).Enabled() {
		t.Fatal("the zero Config must mean no healthcheck")
	}
	for _, c := range []struct {
		cfg   Config
		field string
	}{
		{Config{Kind: "grpc"}, "kind"},
		{Config{Kind: KindExec}, "command"},
		{Config{Kind: KindExec, Command: []string{" "}}, "command"},
		{Config{Kind: KindHTTP, Path: "healthz"}, "path"},
		{Config{Kind: KindTCP, Port: 70000}, "port"},
		{Config{Kind: KindTCP, Interval: -time.Second}, "interval"},
		{Config{Kind: KindTCP, Timeout: -time.Second}, "timeout"},
		{Config{Kind: KindTCP, StartPeriod: -time.Second}, "start_period"},
		{Config{Kind: KindTCP, StartInterval: -time.Second}, "start_interval"},
		{Config{Kind: KindTCP, Retries: -1}, "retries"},
	} {
		err := c.cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%+v: error %v, want ErrInvalidConfig naming %s", c.cfg, err, c.field)
		}
	}
	for _, ok := range []Config{{}, {Kind: KindNone}, {Kind: KindTCP}, {Kind: KindHTTP, Path: "/x"}, {Kind: KindExec, Command: []string{"true"}}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

// SUP-14, issue 18 (found by the chaos fault daemon.fd-limit): a probe
// whose connection fails for want of the daemon's own descriptors could
// not run: neither healthy nor unhealthy, so a healthy workload is never
// restarted for the daemon's exhausted files. The child process lowers
// its own open-file limit to what it holds, so a socket cannot be made.
func TestSUP14ProbeWithoutDescriptorsCouldNotRun(t *testing.T) {
	if addr := os.Getenv("ENGENHO_PROBE_EMFILE_CHILD"); addr != "" {
		// Start the runtime's poller first (it needs a descriptor of its
		// own), then lower the limit until not even one socket can be made.
		if l, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
			l.Close()
		}
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		for n := uint64(len(entries)); n > 3; n-- {
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: 4096}); err != nil {
				t.Fatal(err)
			}
			fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
			if err != nil {
				break
			}
			syscall.Close(fd)
		}
		p := realProber()
		target := Target{Instance: "web-1", Addresses: map[int]string{80: addr}}
		for _, kind := range []Kind{KindHTTP, KindTCP} {
			r := p.Probe(context.Background(), Config{Kind: kind, Path: "/", Timeout: 2 * time.Second}.WithDefaults(), target)
			if r.Outcome != Error || !strings.Contains(r.Output, "could not run") {
				fmt.Printf("PROBE %s: %s %q\n", kind, r.Outcome, r.Output)
				return
			}
		}
		fmt.Println("EMFILE OK")
		return
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSUP14ProbeWithoutDescriptorsCouldNotRun$", "-test.v")
	cmd.Env = append(os.Environ(), "ENGENHO_PROBE_EMFILE_CHILD="+srv.Listener.Addr().String())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "EMFILE OK") {
		t.Fatalf("probes without descriptors: %v\n%s", err, out)
	}
}
