package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// demo-http is the workload of the demo stack and of the integration
// tests: an HTTP server on $PORT that says which replica answered. With
// DEMO_HEALTH=fail its /healthz answers 500, which makes a bad revision.
// With DEMO_ALLOW_ALLOC=1, GET /alloc?mib=N allocates and touches N MiB
// and keeps it: the chaos suite's workload OOM (DRV-14).
func init() {
	subcommands = append(subcommands, func() *cobra.Command {
		var addr string
		cmd := &cobra.Command{
			Use:    "demo-http",
			Short:  "Serve the demo HTTP workload on $PORT",
			Hidden: true,
			Args:   cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if addr == "" {
					addr = "127.0.0.1:" + os.Getenv("PORT")
				}
				return serveDemo(addr)
			},
		}
		cmd.Flags().StringVar(&addr, "listen", "", "listen address (default 127.0.0.1:$PORT)")
		return cmd
	})
}

func serveDemo(addr string) error {
	who := fmt.Sprintf("%s slot %s (%s)", os.Getenv("ENGENHO_SERVICE"), os.Getenv("ENGENHO_SLOT"), os.Getenv("ENGENHO_INSTANCE"))
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if os.Getenv("DEMO_HEALTH") == "fail" {
			http.Error(w, "unhealthy on purpose (DEMO_HEALTH=fail)", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "hello from %s, pid %d\n", who, os.Getpid())
	})
	if os.Getenv("DEMO_ALLOW_ALLOC") == "1" {
		mux.HandleFunc("/alloc", allocHandler())
	}
	return serveUntilSignal("demo-http", addr, mux, who)
}

// allocHandler allocates ?mib=N MiB (at most 4096), writes every page so
// the memory is really used, and keeps it for the process's life.
func allocHandler() http.HandlerFunc {
	var kept [][]byte
	var mu sync.Mutex
	return func(w http.ResponseWriter, r *http.Request) {
		mib, err := strconv.Atoi(r.URL.Query().Get("mib"))
		if err != nil || mib < 1 || mib > 4096 {
			http.Error(w, "want ?mib=N with 1 <= N <= 4096", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for range mib {
			b := make([]byte, 1<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			kept = append(kept, b)
		}
		fmt.Fprintf(w, "holding %d MiB more\n", mib)
	}
}

// serveUntilSignal serves h on addr until SIGTERM or SIGINT, then shuts
// down gracefully: the demo workloads stop the way a good service does.
func serveUntilSignal(prog, addr string, h http.Handler, who string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", prog, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	fmt.Printf("%s: %s listening on %s\n", prog, who, l.Addr())
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
