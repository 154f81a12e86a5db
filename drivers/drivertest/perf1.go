package drivertest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The PERF-1 harness: restart latency as a ratio to the machine's floor,
// measured in the same run (docs/drivers.md, "Restart latency").
//
// Every arm runs the same static marker program. Its first act (the first
// line of main, after static libc's few microseconds of startup) is to
// read CLOCK_MONOTONIC and send the reading, its pid and its arm's tag to
// the harness's unixgram socket. The harness reads the same clock right
// before it SIGKILLs an arm's current run, so kill → the replacement's
// first instruction is measured by the replacement itself, whatever the
// harness's own scheduling.
//
// The floor is a fork+exec loop of the marker: a tiny static C program
// (fork, execv, waitpid, again; FloorC) and the same in Go in the harness
// process (syscall.ForkExec and a blocking wait4; FloorGo). The arms are
// killed in turn, one kill each per round, in an order that rotates every
// round, with a pause between kills so one arm's aftermath does not land
// on the next arm's measurement.

// markerC is the marker. argv: SOCKET TAG.
const markerC = `#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
int main(int argc, char **argv) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	if (argc < 3) return 2;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a;
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	strncpy(a.sun_path, argv[1], sizeof a.sun_path - 1);
	char b[128];
	int n = snprintf(b, sizeof b, "%s %d %lld %ld", argv[2], (int)getpid(), (long long)ts.tv_sec, ts.tv_nsec);
	sendto(fd, b, n, 0, (struct sockaddr *)&a, sizeof a);
	close(fd);
	for (;;) pause();
}
`

// markerGo is the marker where there is no C compiler.
const markerGo = `package main

import (
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	if len(os.Args) < 3 {
		os.Exit(2)
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: os.Args[1], Net: "unixgram"})
	if err == nil {
		fmt.Fprintf(c, "%s %d %d %d", os.Args[2], os.Getpid(), ts.Sec, ts.Nsec)
		c.Close()
	}
	for {
		time.Sleep(time.Hour)
	}
}
`

// floorC is the C floor: a fork+exec loop of argv[1..]. argv: MARKER SOCKET TAG.
const floorC = `#include <errno.h>
#include <unistd.h>
#include <sys/wait.h>
int main(int argc, char **argv) {
	if (argc < 2) return 2;
	for (;;) {
		pid_t pid = fork();
		if (pid == 0) {
			execv(argv[1], argv + 1);
			_exit(127);
		}
		if (pid < 0) { sleep(1); continue; }
		int st;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
	}
}
`

// Mark is one run's report: its arm, its pid, and when its first
// instruction ran (CLOCK_MONOTONIC).
type Mark struct {
	Tag string
	Pid int
	At  time.Duration
}

// Perf1 is a running harness: the marker binary and the socket its runs
// report to.
type Perf1 struct {
	tb testing.TB
	// Dir is a short directory of its own (a socket path is at most 107
	// bytes); removed at cleanup.
	Dir string
	// Marker is the static marker binary; MarkerKind says what it is built
	// from.
	Marker, MarkerKind string
	floor              string // the C fork+exec loop, "" without gcc
	sock               string
	conn               *net.UnixConn

	mu   sync.Mutex
	subs map[string]chan Mark
}

// NewPerf1 builds the marker (C with gcc -static when gcc is here, else
// Go) and the C floor, and opens the socket. Everything goes at tb's end.
func NewPerf1(tb testing.TB) *Perf1 {
	tb.Helper()
	dir, err := os.MkdirTemp("", "perf1-")
	if err != nil {
		tb.Fatal(err)
	}
	p := &Perf1{tb: tb, Dir: dir, sock: filepath.Join(dir, "s"), subs: map[string]chan Mark{}}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	p.Marker = filepath.Join(dir, "marker")
	if gcc(tb, dir, "marker", markerC) == nil {
		p.MarkerKind = "C, gcc -O2 -static"
		if err := gcc(tb, dir, "floor", floorC); err != nil {
			tb.Fatalf("building the C floor: %v", err)
		}
		p.floor = filepath.Join(dir, "floor")
	} else {
		p.MarkerKind = "Go, CGO_ENABLED=0 (no gcc: no C floor)"
		if err := goMarker(dir); err != nil {
			tb.Fatalf("building the Go marker: %v", err)
		}
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p.sock, Net: "unixgram"})
	if err != nil {
		tb.Fatal(err)
	}
	conn.SetReadBuffer(1 << 20)
	p.conn = conn
	tb.Cleanup(func() { conn.Close() })
	go p.read()
	return p
}

// gcc builds name from src in dir as a static binary.
func gcc(tb testing.TB, dir, name, src string) error {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path+".c", []byte(src), 0o644); err != nil {
		return err
	}
	out, err := exec.Command("gcc", "-O2", "-static", "-o", path, path+".c").CombinedOutput()
	if err != nil {
		return fmt.Errorf("gcc: %v: %s", err, out)
	}
	return nil
}

// goMarker builds the Go marker inside this module (for x/sys/unix).
func goMarker(dir string) error {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return fmt.Errorf("finding the module: %w", err)
	}
	src, err := os.MkdirTemp(strings.TrimSpace(string(root)), ".perf1-marker-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(markerGo), 0o644); err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "marker"), ".")
	cmd.Dir, cmd.Env = src, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v: %s", err, out)
	}
	return nil
}

func (p *Perf1) read() {
	buf := make([]byte, 256)
	for {
		n, err := p.conn.Read(buf)
		if err != nil {
			return
		}
		m, ok := parseMark(string(buf[:n]))
		if !ok {
			continue
		}
		p.mu.Lock()
		ch := p.subs[m.Tag]
		p.mu.Unlock()
		if ch != nil {
			select {
			case ch <- m:
			default: // nobody reads this arm any more
			}
		}
	}
}

// parseMark reads "TAG PID SEC NSEC".
func parseMark(s string) (Mark, bool) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return Mark{}, false
	}
	pid, err1 := strconv.Atoi(f[1])
	sec, err2 := strconv.ParseInt(f[2], 10, 64)
	nsec, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Mark{}, false
	}
	return Mark{Tag: f[0], Pid: pid, At: time.Duration(sec)*time.Second + time.Duration(nsec)}, true
}

// monotonic is CLOCK_MONOTONIC now, as the marker reads it.
func monotonic() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Duration(ts.Sec)*time.Second + time.Duration(ts.Nsec)
}

// Arm is one supervisor under measurement: its runs report with its tag.
type Arm struct {
	Name  string
	marks chan Mark
	pid   int
	// stop ends the arm's supervisor, where the harness runs it.
	stop func()
}

// Arm registers an arm: the supervisor must run Argv(name).
func (p *Perf1) Arm(name string) *Arm {
	a := &Arm{Name: name, marks: make(chan Mark, 64)}
	p.mu.Lock()
	p.subs[name] = a.marks
	p.mu.Unlock()
	return a
}

// Argv is the marker's command line for arm tag.
func (p *Perf1) Argv(tag string) []string { return []string{p.Marker, p.sock, tag} }

// FloorC starts the C fork+exec loop as arm name; nil without gcc.
func (p *Perf1) FloorC(name string) *Arm {
	if p.floor == "" {
		return nil
	}
	a := p.Arm(name)
	cmd := exec.Command(p.floor, p.Argv(name)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		p.tb.Fatalf("starting the C floor: %v", err)
	}
	a.stop = func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the loop and its marker
		cmd.Wait()
	}
	p.tb.Cleanup(a.stop)
	return a
}

// FloorGo starts a fork+exec loop in this process as arm name:
// syscall.ForkExec of the marker, a blocking wait4, again.
func (p *Perf1) FloorGo(name string) *Arm {
	a := p.Arm(name)
	var stopped atomic.Bool
	var cur atomic.Int64
	done := make(chan struct{})
	argv := p.Argv(name)
	attr := &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Setpgid: true}}
	go func() {
		defer close(done)
		for !stopped.Load() {
			pid, err := syscall.ForkExec(argv[0], argv, attr)
			if err != nil {
				p.tb.Errorf("floor-go: %v", err)
				return
			}
			cur.Store(int64(pid))
			var ws syscall.WaitStatus
			for {
				if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
					break
				}
			}
		}
	}()
	a.stop = func() {
		if stopped.Swap(true) {
			return
		}
		if pid := cur.Load(); pid > 0 {
			syscall.Kill(int(pid), syscall.SIGKILL)
		}
		<-done
	}
	p.tb.Cleanup(a.stop)
	return a
}

// FloorOS starts the floor loop in this process through os.StartProcess
// and Process.Wait, as os/exec does, as arm name: to compare with
// FloorGo's syscall.ForkExec.
func (p *Perf1) FloorOS(name string) *Arm {
	a := p.Arm(name)
	var stopped atomic.Bool
	var cur atomic.Pointer[os.Process]
	done := make(chan struct{})
	argv := p.Argv(name)
	attr := &os.ProcAttr{Sys: &syscall.SysProcAttr{Setpgid: true}}
	go func() {
		defer close(done)
		for !stopped.Load() {
			proc, err := os.StartProcess(argv[0], argv, attr)
			if err != nil {
				p.tb.Errorf("floor-os: %v", err)
				return
			}
			cur.Store(proc)
			proc.Wait()
		}
	}()
	a.stop = func() {
		if stopped.Swap(true) {
			return
		}
		if proc := cur.Load(); proc != nil {
			proc.Kill()
		}
		<-done
	}
	p.tb.Cleanup(a.stop)
	return a
}

// Floors starts the floor arms every PERF-1 benchmark measures against:
// the C fork+exec loop as "floor" where gcc is here, and the Go loop as
// "floor-go". It returns them in that order and the name of the arm the
// ratios are taken to: "floor", else "floor-go".
func (p *Perf1) Floors() (arms []*Arm, floor string) {
	floor = "floor-go"
	if a := p.FloorC("floor"); a != nil {
		arms, floor = append(arms, a), "floor"
	}
	return append(arms, p.FloorGo("floor-go")), floor
}

// Measure is every PERF-1 benchmark's tail: it waits for each arm's first
// run, kills each arm once per b.Loop iteration (Round, with
// Perf1Settle's pause), prints the table to stdout and reports the
// metrics. The table's note is what (what was measured, "" for nothing
// more), the marker and the load.
func (p *Perf1) Measure(b *testing.B, floor, what string, arms ...*Arm) {
	b.Helper()
	for _, a := range arms {
		a.WaitFirst(b, time.Minute)
	}
	run := p.Start(Perf1Settle(), arms...)
	for b.Loop() {
		run.Round()
	}
	run.Print(os.Stdout, floor, perf1Note(what, p.MarkerKind, Load()))
	run.Report(b, floor)
}

// perf1Note is the table's note: what was measured (if anything), the
// marker and the load.
func perf1Note(what, marker, load string) string {
	note := fmt.Sprintf("marker %s; load %s", marker, load)
	if what != "" {
		note = what + "; " + note
	}
	return note
}

// WaitFirst waits for the arm's first run to report (the supervisor has
// started it).
func (a *Arm) WaitFirst(tb testing.TB, limit time.Duration) {
	tb.Helper()
	select {
	case m := <-a.marks:
		a.pid = m.Pid
	case <-time.After(limit):
		tb.Fatalf("arm %s: no run reported within %s", a.Name, limit)
	}
}

// Perf1Result is each arm's latencies, kill → the replacement's first
// instruction, in the order the arms were given.
type Perf1Result struct {
	Arms      []string
	Latencies map[string][]time.Duration
	Settle    time.Duration
}

// Perf1Run is a measurement under way: Round kills each arm once.
type Perf1Run struct {
	Perf1Result
	tb    testing.TB
	arms  []*Arm
	round int
}

// Start begins a measurement of arms, every arm's first run reported. It
// waits settle before every kill.
func (p *Perf1) Start(settle time.Duration, arms ...*Arm) *Perf1Run {
	r := &Perf1Run{Perf1Result: Perf1Result{Latencies: map[string][]time.Duration{}, Settle: settle}, tb: p.tb, arms: arms}
	for _, a := range arms {
		r.Arms = append(r.Arms, a.Name)
	}
	return r
}

// Round kills each arm's current run once, in an order that rotates every
// round, and measures each replacement. A replacement that does not
// report within 10s fails the benchmark.
func (r *Perf1Run) Round() {
	r.tb.Helper()
	for j := range r.arms {
		a := r.arms[(r.round+j)%len(r.arms)]
		time.Sleep(r.Settle)
		lat, err := a.killOnce()
		if err != nil {
			r.tb.Fatalf("arm %s, round %d: %v", a.Name, r.round, err)
		}
		r.Latencies[a.Name] = append(r.Latencies[a.Name], lat)
	}
	r.round++
}

// killOnce SIGKILLs the arm's run and waits for its replacement.
func (a *Arm) killOnce() (time.Duration, error) {
	old := a.pid
	// A mark left over (a supervisor that started two runs) is not ours.
	for len(a.marks) > 0 {
		<-a.marks
	}
	t0 := monotonic()
	if err := unix.Kill(old, unix.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill %d: %w", old, err)
	}
	limit := time.After(10 * time.Second)
	for {
		select {
		case m := <-a.marks:
			if m.Pid == old || m.At < t0 {
				continue
			}
			a.pid = m.Pid
			return m.At - t0, nil
		case <-limit:
			return 0, fmt.Errorf("no replacement for pid %d within 10s", old)
		}
	}
}

// Quantile is the q-quantile of ds (nearest rank); ds need not be sorted.
func Quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// Perf1Quantiles are the quantiles the table shows.
var Perf1Quantiles = []float64{0.5, 0.9, 0.99}

// Ratio is arm's q-quantile over floor's.
func (r Perf1Result) Ratio(arm, floor string, q float64) float64 {
	f := Quantile(r.Latencies[floor], q)
	if f <= 0 {
		return 0
	}
	return float64(Quantile(r.Latencies[arm], q)) / float64(f)
}

// Print writes the table: each arm's p50, p90, p99 in ms and its ratios to
// floor's, with PERF-1's targets (p50 ≤ 1.2x, p99 ≤ 1.5x).
func (r Perf1Result) Print(w io.Writer, floor, note string) {
	fmt.Fprintf(w, "PERF-1 restart latency: SIGKILL → the replacement's first instruction, %d kills per arm, interleaved (settle %s); %s\n",
		len(r.Latencies[floor]), r.Settle, note)
	fmt.Fprintf(w, "%-18s %9s %9s %9s %9s   %8s %8s %8s\n", "arm", "p50 ms", "p90 ms", "p99 ms", "max ms", "p50/fl", "p90/fl", "p99/fl")
	for _, a := range r.Arms {
		ds := r.Latencies[a]
		fmt.Fprintf(w, "%-18s %9.3f %9.3f %9.3f %9.3f   %7.2fx %7.2fx %7.2fx\n", a,
			ms(Quantile(ds, 0.5)), ms(Quantile(ds, 0.9)), ms(Quantile(ds, 0.99)), ms(Quantile(ds, 1)),
			r.Ratio(a, floor, 0.5), r.Ratio(a, floor, 0.9), r.Ratio(a, floor, 0.99))
	}
	fmt.Fprintf(w, "target: p50 ≤ 1.20x and p99 ≤ 1.50x of %s (spec PERF-1)\n", floor)
}

// Report adds each arm's p50/p99 and its ratios to floor's to b's metrics.
func (r Perf1Result) Report(b *testing.B, floor string) {
	for _, a := range r.Arms {
		ds := r.Latencies[a]
		b.ReportMetric(ms(Quantile(ds, 0.5)), a+"-p50-ms")
		b.ReportMetric(ms(Quantile(ds, 0.99)), a+"-p99-ms")
		if a != floor {
			b.ReportMetric(r.Ratio(a, floor, 0.5), a+"-p50-x")
			b.ReportMetric(r.Ratio(a, floor, 0.99), a+"-p99-x")
		}
	}
	b.ReportMetric(0, "ns/op")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Perf1Settle is the pause before each kill: ENGENHO_PERF1_SETTLE, else
// 20ms.
func Perf1Settle() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("ENGENHO_PERF1_SETTLE")); err == nil && d >= 0 {
		return d
	}
	return 20 * time.Millisecond
}
