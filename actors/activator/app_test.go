package activator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary doubles as the hibernating workload of the process
// driver tests: with ENGENHO_TEST_APP=1 it serves the app on $PORT.
func TestMain(m *testing.M) {
	if os.Getenv("ENGENHO_TEST_APP") == "1" {
		os.Exit(serveApp())
	}
	goleak.VerifyTestMain(m)
}

// control lets a test steer an in-process app.
type control struct {
	nextDue atomic.Int64 // unix seconds answered at next-due
	ticks   atomic.Int64
	hits    atomic.Int64
	mu      sync.Mutex
	hold    chan struct{} // when set, /slow and ticks wait on it
}

func (c *control) holdCh() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hold
}

func (c *control) block() {
	c.mu.Lock()
	c.hold = make(chan struct{})
	c.mu.Unlock()
}

func (c *control) release() {
	c.mu.Lock()
	if c.hold != nil {
		close(c.hold)
		c.hold = nil
	}
	c.mu.Unlock()
}

// appHandler is the workload: a counter kept in the data directory.
func appHandler(dataDir string, c *control) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/count", func(w http.ResponseWriter, _ *http.Request) {
		c.hits.Add(1)
		n, err := bump(dataDir)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		fmt.Fprint(w, n)
	})
	mux.HandleFunc("/read", func(w http.ResponseWriter, _ *http.Request) {
		b, _ := os.ReadFile(filepath.Join(dataDir, "count"))
		seed, _ := os.ReadFile(filepath.Join(dataDir, "seed.txt"))
		fmt.Fprintf(w, "%s|%s", strings.TrimSpace(string(b)), strings.TrimSpace(string(seed)))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		if ch := c.holdCh(); ch != nil {
			select {
			case <-ch:
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, "slow done")
	})
	mux.HandleFunc("/.well-known/engenho/next-due", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, c.nextDue.Load())
	})
	mux.HandleFunc("/.well-known/engenho/tick", func(w http.ResponseWriter, r *http.Request) {
		c.ticks.Add(1)
		if ch := c.holdCh(); ch != nil {
			select {
			case <-ch:
			case <-r.Context().Done():
			}
		}
		fmt.Fprint(w, "ticked")
	})
	return mux
}

var bumpMu sync.Mutex

func bump(dir string) (int, error) {
	bumpMu.Lock()
	defer bumpMu.Unlock()
	path := filepath.Join(dir, "count")
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	n++
	if err := os.WriteFile(path+".tmp", []byte(strconv.Itoa(n)), 0o600); err != nil {
		return 0, err
	}
	return n, os.Rename(path+".tmp", path)
}

// serveApp is the subprocess workload.
func serveApp() int {
	c := &control{}
	if s := os.Getenv("APP_NEXT_DUE_IN"); s != "" {
		d, _ := time.ParseDuration(s)
		c.nextDue.Store(time.Now().Add(d).Unix())
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("PORT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: appHandler(os.Getenv("ENGENHO_DATA_DIR"), c), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return 1
	}
	return 0
}

var _ = testing.Short
