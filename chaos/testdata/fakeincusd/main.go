// Command fakeincusd stands in for incusd in the tests of restartIncusd:
// built as a file named incusd, it answers GET /1.0 on $FAKE_INCUSD_SOCKET
// with its pid as environment.server_pid, prints its argv, one environment
// variable and its open-files limit to stdout at start, and exits on
// SIGTERM after FAKE_INCUSD_EXIT_DELAY (removing its socket, as incusd
// does). With FAKE_INCUSD_IGNORE_TERM=1 only SIGKILL ends it.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	socket := os.Getenv("FAKE_INCUSD_SOCKET")
	var lim syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	fmt.Printf("fakeincusd pid=%d argv=%q marker=%s nofile=%d sid=%v\n", os.Getpid(), os.Args, os.Getenv("FAKE_INCUSD_MARKER"), lim.Cur, sessionLeader())
	os.Remove(socket) // a crashed predecessor leaves it behind, as incusd handles
	ln, err := net.Listen("unix", socket)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"type": "sync", "metadata": map[string]any{
			"environment": map[string]any{"server_pid": os.Getpid()}}})
	}))
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	for range sigs {
		if os.Getenv("FAKE_INCUSD_IGNORE_TERM") == "1" {
			continue
		}
		d, _ := time.ParseDuration(os.Getenv("FAKE_INCUSD_EXIT_DELAY"))
		time.Sleep(d)
		ln.Close()
		os.Exit(0)
	}
}

func sessionLeader() bool {
	sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0)
	return int(sid) == os.Getpid()
}
