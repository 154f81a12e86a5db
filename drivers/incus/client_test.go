package incus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
)

// fakeIncusd serves a few canned answers over a unix socket, the way
// incusd frames them (sync / async / error envelopes), so the client's
// decoding and the driver's error kinds are tested without incusd.
type fakeIncusd struct {
	t       *testing.T
	socket  string
	mu      sync.Mutex
	deleted []string
	files   map[string]string // path query -> content
	// fileFails is how many more reads of a path answer 500, as incusd
	// does while it replaces its forkfile helper.
	fileFails map[string]int
	// clk and orphanUntil model incusd 6.0's forkfile race (see
	// fileQuiet): a file request made before orphanUntil fails and leaves
	// a helper nobody can reach until 15s later; fileFailed counts them.
	clk         *clock.Fake
	orphanUntil time.Time
	fileFailed  int
	// fileHold, when set, holds every file request until it is closed;
	// events records the order of file requests and starts.
	fileHold chan struct{}
	events   []string
}

func (f *fakeIncusd) event(e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, e)
}

func sync200(w http.ResponseWriter, metadata any) {
	b, _ := json.Marshal(metadata)
	fmt.Fprintf(w, `{"type":"sync","status":"Success","status_code":200,"metadata":%s}`, b)
}

func errorAnswer(w http.ResponseWriter, code int, msg string) {
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"type":"error","error":%q,"error_code":%d}`, msg, code)
}

func startFakeIncusd(t *testing.T) *fakeIncusd {
	t.Helper()
	f := &fakeIncusd{t: t, socket: filepath.Join(t.TempDir(), "unix.socket"), files: map[string]string{
		"/.engenho/output.log": "0123456789",
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /1.0", func(w http.ResponseWriter, r *http.Request) {
		sync200(w, map[string]any{"api_version": "1.0", "auth": "trusted", "environment": map[string]any{"server_version": "6.0.4"}})
	})
	mux.HandleFunc("GET /1.0/images/aliases/{alias}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("alias") != "busybox" {
			errorAnswer(w, 404, "Image alias not found")
			return
		}
		sync200(w, map[string]any{"name": "busybox", "target": "abc"})
	})
	mux.HandleFunc("GET /1.0/instances/{name}", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("project") != "p1" {
			errorAnswer(w, 400, "want project p1")
			return
		}
		if r.PathValue("name") != "web-1" {
			errorAnswer(w, 404, "Instance not found")
			return
		}
		sync200(w, map[string]any{"name": "web-1", "status": "Running", "config": map[string]string{"user.engenho.stack": "s", "raw.lxc": initConfig},
			"devices": map[string]any{"engenho-port-80": map[string]string{"type": "proxy", "listen": "tcp:127.0.0.1:4100", "connect": "tcp:127.0.0.1:80"}},
			"state":   map[string]any{"status": "Running", "pid": 4242, "started_at": "2026-01-02T03:04:05Z"}})
	})
	mux.HandleFunc("POST /1.0/instances/{name}/exec", func(w http.ResponseWriter, r *http.Request) {
		var post ExecPost
		if err := json.NewDecoder(r.Body).Decode(&post); err != nil || !post.RecordOutput || post.WaitForWS {
			errorAnswer(w, 400, "bad exec body")
			return
		}
		op := "ok"
		if post.Command[0] == "missing" {
			op = "failed"
		}
		fmt.Fprintf(w, `{"type":"async","status":"Operation created","status_code":100,"operation":"/1.0/operations/%s"}`, op)
	})
	ops := map[string]map[string]any{
		"ok": {"id": "ok", "status": "Success", "status_code": 200, "metadata": map[string]any{
			"return": 3, "output": map[string]string{"1": "/1.0/instances/web-1/logs/exec-output/exec_ok.stdout", "2": "/1.0/instances/web-1/logs/exec-output/exec_ok.stderr"}}},
		"failed": {"id": "failed", "status": "Failure", "status_code": 400, "err": "Command not found", "metadata": map[string]any{"return": 127}},
	}
	mux.HandleFunc("GET /1.0/operations/{id}/wait", func(w http.ResponseWriter, r *http.Request) {
		op := ops[r.PathValue("id")]
		if op["status_code"] != 200 { // incusd answers /wait of a failed operation with its error
			errorAnswer(w, 400, op["err"].(string))
			return
		}
		sync200(w, op)
	})
	mux.HandleFunc("GET /1.0/operations/{id}", func(w http.ResponseWriter, r *http.Request) { sync200(w, ops[r.PathValue("id")]) })
	mux.HandleFunc("GET /1.0/instances/web-1/logs/exec-output/{file}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, strings.TrimPrefix(filepath.Ext(r.PathValue("file")), ".")+"\n")
	})
	mux.HandleFunc("DELETE /1.0/instances/web-1/logs/exec-output/{file}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.deleted = append(f.deleted, r.PathValue("file"))
		f.mu.Unlock()
		sync200(w, nil)
	})
	mux.HandleFunc("PUT /1.0/instances/web-1/state", func(w http.ResponseWriter, r *http.Request) {
		f.event("start")
		fmt.Fprint(w, `{"type":"async","status":"Operation created","status_code":100,"operation":"/1.0/operations/ok"}`)
	})
	mux.HandleFunc("GET /1.0/instances/web-1/files", func(w http.ResponseWriter, r *http.Request) {
		if f.fileHold != nil {
			f.event("file begins")
			<-f.fileHold
			f.event("file ends")
		}
		f.mu.Lock()
		fail := f.fileFails[r.URL.Query().Get("path")] > 0
		if fail {
			f.fileFails[r.URL.Query().Get("path")]--
		}
		if f.clk != nil && f.clk.Now().Before(f.orphanUntil) {
			fail = true
			f.orphanUntil = f.clk.Now().Add(15 * time.Second)
		}
		if fail {
			f.fileFailed++
		}
		f.mu.Unlock()
		if fail {
			errorAnswer(w, 500, "dial unix /proc/self/fd/62/forkfile.sock: connect: no such file or directory")
			return
		}
		content, ok := f.files[r.URL.Query().Get("path")]
		if !ok {
			errorAnswer(w, 404, "not found")
			return
		}
		http.ServeContent(w, r, "f", time.Time{}, strings.NewReader(content))
	})
	l, err := net.Listen("unix", f.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

func fakeClient(t *testing.T, f *fakeIncusd) *Client {
	c, err := NewClient(ClientConfig{Socket: f.socket, Project: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// DRV-5: the client decodes incusd's envelopes: sync metadata, error
// answers as *APIError with the status, and the project on every request.
func TestClientEnvelopes(t *testing.T) {
	f := startFakeIncusd(t)
	c := fakeClient(t, f)
	ctx := context.Background()
	info, err := c.Server(ctx)
	if err != nil || info.Auth != "trusted" || info.Environment.ServerVersion != "6.0.4" {
		t.Fatalf("Server: %+v %v", info, err)
	}
	in, err := c.Instance(ctx, "web-1")
	if err != nil || in.State == nil || in.State.Pid != 4242 || in.Config["user.engenho.stack"] != "s" {
		t.Fatalf("Instance: %+v %v", in, err)
	}
	_, err = c.Instance(ctx, "nope")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || !IsNotFound(err) || ae.Message != "Instance not found" {
		t.Errorf("missing instance: %v", err)
	}
}

// DRV-5: exec with record-output: the exit code from the operation's
// metadata, output from the logs it names, which are deleted afterwards; a
// failed operation (command not found) still gives its return code.
func TestClientExec(t *testing.T) {
	f := startFakeIncusd(t)
	c := fakeClient(t, f)
	res, err := c.Exec(context.Background(), "web-1", ExecPost{Command: []string{"probe"}})
	if err != nil || res.Return != 3 || string(res.Stdout) != "stdout\n" || string(res.Stderr) != "stderr\n" {
		t.Fatalf("Exec: %+v %v", res, err)
	}
	if fmt.Sprint(f.deleted) != "[exec_ok.stdout exec_ok.stderr]" {
		t.Errorf("deleted exec-output %v, want both files", f.deleted)
	}
	res, err = c.Exec(context.Background(), "web-1", ExecPost{Command: []string{"missing"}})
	var oe *OperationError
	if !errors.As(err, &oe) || res.Return != 127 || !strings.Contains(err.Error(), "Command not found") {
		t.Errorf("failed exec: %+v %v, want OperationError with return 127", res, err)
	}
}

// Follow reads files from an offset with HTTP ranges; at the end it learns
// the size (so a truncated file is noticed).
func TestClientReadFileRange(t *testing.T) {
	f := startFakeIncusd(t)
	c := fakeClient(t, f)
	ctx := context.Background()
	for _, tc := range []struct {
		offset int64
		data   string
		size   int64
	}{{0, "0123456789", 10}, {4, "456789", 10}, {10, "", 10}, {25, "", 10}} {
		fr, err := c.ReadFile(ctx, "web-1", "/.engenho/output.log", tc.offset)
		if err != nil || string(fr.Data) != tc.data || fr.Size != tc.size {
			t.Errorf("ReadFile at %d: %q size %d err %v, want %q size %d", tc.offset, fr.Data, fr.Size, err, tc.data, tc.size)
		}
	}
	if _, err := c.ReadFile(ctx, "web-1", "/nope", 0); !IsNotFound(err) {
		t.Errorf("missing file: %v, want 404", err)
	}
}

// DRV-1: the driver's errors carry kinds; Inspect maps the instance.
func TestDriverOnFakeIncusd(t *testing.T) {
	f := startFakeIncusd(t)
	d, err := New(Options{Socket: f.socket, Project: "p1"})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer d.Close()
	ctx := context.Background()
	st, err := d.Inspect(ctx, "web-1")
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if st.State != drivers.StateRunning || st.Pid != 4242 || st.StartedAt.IsZero() || st.Addresses[80] != "127.0.0.1:4100" || st.Labels["engenho.stack"] != "s" {
		t.Errorf("Inspect: %+v", st)
	}
	if _, err := d.Inspect(ctx, "nope"); !errors.Is(err, drivers.ErrNotFound) {
		t.Errorf("Inspect of a missing instance: %v, want ErrNotFound", err)
	}
	res, err := d.Exec(ctx, "web-1", []string{"missing"})
	if err != nil || res.ExitCode != 127 {
		t.Errorf("Exec of a missing command: %+v %v, want exit 127 and no error", res, err)
	}
	err = d.Validate(ctx, drivers.Spec{Name: "web-2", Image: "alpine"})
	if !errors.Is(err, drivers.ErrInvalid) || !strings.Contains(err.Error(), `"alpine"`) {
		t.Errorf("Validate with an unknown alias: %v", err)
	}
	if rc, err := d.Logs(ctx, "web-1", drivers.LogOptions{}); err != nil {
		t.Errorf("Logs: %v", err)
	} else {
		rc.Close()
	}
}

// DRV-5, DRV-6, DRV-13: how a spec becomes an instance: labels as user.*,
// env as environment.*, ports as loopback proxy devices, limits (memory
// with no swap, pids), the entrypoint.
func TestInstancePost(t *testing.T) {
	d := &Driver{opts: Options{StoragePool: "fast"}, profiles: []string{"default"}}
	post := d.instancePost(drivers.Spec{
		Name: "s-web-0-a", Image: "busybox", Command: []string{"httpd"},
		Labels:    drivers.Labels{"engenho.stack": "s", "engenho.deployment": ""},
		Env:       map[string]string{"A": "1"},
		Ports:     []drivers.Port{{Target: 80, HostPort: 41000}, {Target: 53, HostPort: 41053, Protocol: "udp"}},
		Resources: drivers.Resources{CPUs: 1.5, MemoryBytes: 512 << 20, Pids: 64},
	})
	want := map[string]string{
		"user.engenho.stack": "s", "environment.A": "1", "raw.lxc": initConfig,
		"limits.cpu": "2", "limits.cpu.allowance": "150ms/100ms", "limits.memory": "536870912B",
		"limits.memory.swap": "false", "limits.processes": "64",
	}
	if fmt.Sprint(post.Config) != fmt.Sprint(want) {
		t.Errorf("config %v, want %v", post.Config, want)
	}
	if p := post.Devices["engenho-port-80"]; p["listen"] != "tcp:127.0.0.1:41000" || p["connect"] != "tcp:127.0.0.1:80" || p["type"] != "proxy" {
		t.Errorf("port 80 device %v", p)
	}
	if p := post.Devices["engenho-port-53"]; p["listen"] != "udp:127.0.0.1:41053" {
		t.Errorf("port 53 device %v", p)
	}
	if r := post.Devices["root"]; r["pool"] != "fast" || r["path"] != "/" {
		t.Errorf("root device %v", r)
	}
	if post.Source.Alias != "busybox" || post.Type != "container" {
		t.Errorf("source %+v type %s", post.Source, post.Type)
	}
}

// SEC-3 and incus's own name rules; spec fields incus cannot honour.
func TestCheckSpec(t *testing.T) {
	ok := drivers.Spec{Name: "s-web-0-a1", Image: "busybox"}
	if err := checkSpecFields(ok, true); err != nil {
		t.Fatalf("valid spec: %v", err)
	}
	// At validation the host port is not allocated yet (SVC-2).
	if err := checkSpecFields(drivers.Spec{Name: "a", Image: "b", Ports: []drivers.Port{{Target: 80}}}, false); err != nil {
		t.Fatalf("validation of an unallocated port: %v", err)
	}
	for what, c := range map[string]struct {
		spec drivers.Spec
		kind error
	}{
		"long name":      {drivers.Spec{Name: strings.Repeat("a", 64), Image: "b"}, drivers.ErrInvalid},
		"trailing dash":  {drivers.Spec{Name: "web-", Image: "b"}, drivers.ErrInvalid},
		"all digits":     {drivers.Spec{Name: "1234", Image: "b"}, drivers.ErrInvalid},
		"dot":            {drivers.Spec{Name: "a.b", Image: "b"}, drivers.ErrInvalid},
		"no image":       {drivers.Spec{Name: "a"}, drivers.ErrInvalid},
		"user":           {drivers.Spec{Name: "a", Image: "b", User: "1000"}, drivers.ErrUnsupported},
		"bad env":        {drivers.Spec{Name: "a", Image: "b", Env: map[string]string{"A=B": "x"}}, drivers.ErrInvalid},
		"bad label":      {drivers.Spec{Name: "a", Image: "b", Labels: drivers.Labels{"a b": "x"}}, drivers.ErrInvalid},
		"no host port":   {drivers.Spec{Name: "a", Image: "b", Ports: []drivers.Port{{Target: 80}}}, drivers.ErrInvalid},
		"bad protocol":   {drivers.Spec{Name: "a", Image: "b", Ports: []drivers.Port{{Target: 80, HostPort: 8080, Protocol: "sctp"}}}, drivers.ErrInvalid},
		"twice":          {drivers.Spec{Name: "a", Image: "b", Ports: []drivers.Port{{Target: 80, HostPort: 1}, {Target: 80, HostPort: 2}}}, drivers.ErrInvalid},
		"negative limit": {drivers.Spec{Name: "a", Image: "b", Resources: drivers.Resources{CPUs: -1}}, drivers.ErrInvalid},
	} {
		if err := checkSpecFields(c.spec, true); !errors.Is(err, c.kind) {
			t.Errorf("%s: %v, want %v", what, err, c.kind)
		}
	}
}

func TestMapState(t *testing.T) {
	for in, want := range map[string]drivers.State{
		"Running": drivers.StateRunning, "Stopping": drivers.StateRunning, "Stopped": drivers.StateStopped,
		"Starting": drivers.StateStarting, "Frozen": drivers.StatePaused, "Error": drivers.StateUnknown, "": drivers.StateUnknown,
	} {
		if got := mapState(in); got != want {
			t.Errorf("mapState(%q) = %q, want %q", in, got, want)
		}
	}
}

// DRV-5: incusd's file API answers 500 while it replaces its forkfile
// helper (seen in CI: "dial unix /proc/self/fd/62/forkfile.sock"); Logs
// tries again instead of failing, fileAttempts reads in all.
func TestLogsRetryForkfileWindow(t *testing.T) {
	f := startFakeIncusd(t)
	f.fileFails = map[string]int{"/.engenho/output.log": fileAttempts - 1}
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	out, err := logsOnFakeClock(t, f, clk)
	if err != nil || out != "0123456789" {
		t.Fatalf("Logs after %d failed reads: %q, %v; want the log", fileAttempts-1, out, err)
	}
	if left := f.fileFails["/.engenho/output.log"]; left != 0 {
		t.Fatalf("%d failing reads left unread", left)
	}
	f.fileFails = map[string]int{"/.engenho/output.log": fileAttempts}
	if out, err := logsOnFakeClock(t, f, clk); !errors.Is(err, drivers.ErrTransient) {
		t.Fatalf("Logs after %d failed reads: %q, %v; want ErrTransient", fileAttempts, out, err)
	}
}

// DRV-5: a file request that meets incusd 6.0's forkfile race fails and
// leaves an unreachable helper for 15s, during which every file request
// fails the same way (seen in CI: Logs failed after 30s of retries every
// 50ms). Logs leaves the instance's files alone for fileQuiet after a
// failure, so its next request finds the helper gone and succeeds.
func TestLogsOutwaitForkfileOrphan(t *testing.T) {
	f := startFakeIncusd(t)
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	f.mu.Lock()
	f.clk, f.orphanUntil = clk, clk.Now().Add(15*time.Second)
	f.mu.Unlock()
	start := clk.Now()
	out, err := logsOnFakeClock(t, f, clk)
	if err != nil || out != "0123456789" {
		t.Fatalf("Logs after %v of fake time: %q, %v; want the log", clk.Since(start), out, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fileFailed != 1 {
		t.Errorf("%d file requests failed, want 1 (the one that met the race)", f.fileFailed)
	}
}

// logsOnFakeClock reads web-1's log through a driver on clk, moving clk
// to each timer the driver arms until Logs returns.
func logsOnFakeClock(t *testing.T, f *fakeIncusd, clk *clock.Fake) (string, error) {
	t.Helper()
	d, err := New(Options{Socket: f.socket, Project: "p1", Clock: clk})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer d.Close()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		rc, err := d.Logs(context.Background(), "web-1", drivers.LogOptions{})
		if err != nil {
			done <- result{err: err}
			return
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		done <- result{string(b), err}
	}()
	for {
		select {
		case r := <-done:
			return r.out, r.err
		default:
		}
		if clk.WaitForTimers(1, 10*time.Millisecond) {
			if due, ok := clk.NextDue(); ok {
				clk.Set(due)
			}
		}
	}
}
