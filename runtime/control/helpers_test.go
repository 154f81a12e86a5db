package control_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/control/controltest"
)

// childEnv makes the test binary act as a client run as another user:
// ENGENHO_CONTROL_CHILD=SOCKET dials, prints the first answer line to
// stdout (or the dial error) and exits.
const childEnv = "ENGENHO_CONTROL_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(runChild(path))
	}
	goleak.VerifyTestMain(m)
}

func runChild(path string) int {
	nc, err := net.Dial("unix", path)
	if err != nil {
		os.Stdout.WriteString("dial: " + err.Error() + "\n")
		return 3
	}
	defer nc.Close()
	nc.Write([]byte(`{"id":1,"op":"status"}` + "\n"))
	line, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil {
		os.Stdout.WriteString("read: " + err.Error() + "\n")
		return 4
	}
	os.Stdout.WriteString(line)
	return 0
}

// wait is how long a test waits for something that should happen at once
// (never a timed assertion: only a bound so a broken test fails instead of
// hanging).
const wait = 10 * time.Second

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// shortDir is a temp directory with a path short enough for a socket.
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ctl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

type served struct {
	once sync.Once
	srv  *control.Server
	path string
	log  *syncBuffer
	done chan error
}

// serve starts a server on h in a fresh directory; mod adjusts the options.
func serve(t testing.TB, h control.Handler, mod func(*control.Options)) *served {
	t.Helper()
	dir := shortDir(t)
	logs := &syncBuffer{}
	opts := control.Options{
		Path:    filepath.Join(dir, "engenho.sock"),
		Handler: h,
		Logger:  zerolog.New(logs),
	}
	if mod != nil {
		mod(&opts)
	}
	srv, err := control.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s := &served{srv: srv, path: opts.Path, log: logs, done: make(chan error, 1)}
	go func() { s.done <- srv.Serve() }()
	t.Cleanup(s.close)
	return s
}

func (s *served) close() {
	s.once.Do(func() {
		s.srv.Close()
		<-s.done
	})
}

func dial(t testing.TB, path string) *control.Client {
	t.Helper()
	c, err := control.Dial(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// raw is a bare connection for protocol tests.
type raw struct {
	t  testing.TB
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t testing.TB, path string) *raw {
	t.Helper()
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &raw{t: t, nc: nc, r: bufio.NewReaderSize(nc, 1<<20)}
}

func (r *raw) send(line string) {
	r.t.Helper()
	if _, err := r.nc.Write([]byte(line + "\n")); err != nil {
		r.t.Fatal(err)
	}
}

// next reads one answer line; it fails the test at EOF.
func (r *raw) next() control.Response {
	r.t.Helper()
	resp, err := r.read()
	if err != nil {
		r.t.Fatalf("reading an answer: %v", err)
	}
	return resp
}

func (r *raw) read() (control.Response, error) {
	r.nc.SetReadDeadline(time.Now().Add(wait))
	line, err := r.r.ReadBytes('\n')
	if err != nil {
		return control.Response{}, err
	}
	var resp control.Response
	if err := json.Unmarshal(line, &resp); err != nil {
		r.t.Fatalf("answer %q: %v", line, err)
	}
	return resp, nil
}

// eof asserts the server closed the connection.
func (r *raw) eof() {
	r.t.Helper()
	resp, err := r.read()
	if err == nil {
		r.t.Fatalf("want the connection closed, got %+v", resp)
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return c
}

// newFake is a fake handler with a small status.
func newFake() *controltest.Fake { return &controltest.Fake{} }
