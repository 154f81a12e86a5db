package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// demo-counter is the stateful workload of the hibernate demo stack: an
// HTTP server on $PORT that counts visits in $ENGENHO_DATA_DIR/count, so a
// sleep and wake round trip shows the state surviving. With
// DEMO_DUE_EVERY=DURATION it answers /.well-known/engenho/next-due with
// the next multiple of that duration, so the platform wakes it then, and
// counts the ticks it receives in $ENGENHO_DATA_DIR/ticks.
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var addr string
		cmd := &cobra.Command{
			Use:    "demo-counter",
			Short:  "Serve the stateful demo workload on $PORT",
			Hidden: true,
			Args:   cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if addr == "" {
					addr = "127.0.0.1:" + os.Getenv("PORT")
				}
				dir := os.Getenv("ENGENHO_DATA_DIR")
				if dir == "" {
					return errors.New("demo-counter: ENGENHO_DATA_DIR is not set (run it as a hibernating service)")
				}
				var every time.Duration
				if s := os.Getenv("DEMO_DUE_EVERY"); s != "" {
					d, err := time.ParseDuration(s)
					if err != nil || d <= 0 {
						return fmt.Errorf("demo-counter: DEMO_DUE_EVERY=%q: want a positive duration", s)
					}
					every = d
				}
				return serveCounter(addr, dir, every)
			},
		}
		cmd.Flags().StringVar(&addr, "listen", "", "listen address (default 127.0.0.1:$PORT)")
		return cmd
	})
}

// counterFile is a number kept in a file, replaced atomically.
type counterFile struct {
	mu   sync.Mutex
	path string
}

func (c *counterFile) read() int {
	b, _ := os.ReadFile(c.path)
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func (c *counterFile) bump() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.read() + 1
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(n)+"\n"), 0o600); err != nil {
		return 0, err
	}
	return n, os.Rename(tmp, c.path)
}

func serveCounter(addr, dir string, every time.Duration) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("demo-counter: %w", err)
	}
	visits := &counterFile{path: filepath.Join(dir, "count")}
	ticks := &counterFile{path: filepath.Join(dir, "ticks")}
	name := os.Getenv("ENGENHO_SERVICE")
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/.well-known/engenho/next-due", func(w http.ResponseWriter, _ *http.Request) {
		if every <= 0 {
			fmt.Fprintln(w, 0)
			return
		}
		fmt.Fprintln(w, time.Now().Truncate(every).Add(every).Unix())
	})
	mux.HandleFunc("/.well-known/engenho/tick", func(w http.ResponseWriter, r *http.Request) {
		n, err := ticks.bump()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Printf("demo-counter: tick %d\n", n)
		fmt.Fprintln(w, "tick", n)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		n, err := visits.bump()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		seed, _ := os.ReadFile(filepath.Join(dir, "seed.txt"))
		fmt.Fprintf(w, "hello from %s: visit %d, ticks %d, seed %q, pid %d\n", name, n, ticks.read(), strings.TrimSpace(string(seed)), os.Getpid())
	})
	return serveUntilSignal("demo-counter", addr, mux, fmt.Sprintf("%s, data in %s", name, dir))
}
