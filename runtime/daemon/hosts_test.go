package daemon_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/drivertest"
	"github.com/engenho/engenho/messages"
)

const hostStack = `name: hib
services:
  notes:
    command: ["${ENGENHO_BIN}", "demo-counter"]
    ports: ["80"]
    healthcheck:
      http: {path: /healthz}
      interval: 2s
      start_interval: 200ms
    hibernate:
      host: notes.localhost
      idle: 10m
      replication: stream
`

// hostNode is a daemon with the edge on port and the given object store.
func hostNode(t *testing.T, name string, port int, objstore string) *node {
	n := newNode(t)
	n.extra = fmt.Sprintf("node: {name: %s}\nedge: {listen: 127.0.0.1:%d}\n%s", name, port, objstore)
	n.writeConfig()
	return n
}

// wake sends one request to a node's edge for the demo host.
func wake(port int) (int, string) {
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/", port), nil)
	req.Host = "notes.localhost"
	c := http.Client{Timeout: 40 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b := make([]byte, 512)
	k, _ := resp.Body.Read(b)
	return resp.StatusCode, string(b[:k])
}

func hostState(n *node) messages.HostState {
	st, err := n.status()
	if err != nil {
		return ""
	}
	for _, h := range st.Hosts {
		if h.Host == "notes.localhost" {
			return h.State
		}
	}
	return ""
}

// dieNode is a node's death: the daemon and every workload it started.
func dieNode(n *node) { n.cleanup() }

// twoDaemons runs ACT-14 on two real daemons (two data dirs) sharing one
// store: concurrent wakes through both edges never run the host twice, and
// when the node holding it dies the other takes over once the lease's TTL
// has passed.
func twoDaemons(t *testing.T, store string) {
	a := hostNode(t, "node-a", 18101, store)
	b := hostNode(t, "node-b", 18102, store)
	a.start("running")
	b.start("running")
	stack := a.writeFile("hib.yaml", hostStack)
	a.mustCLI("apply", stack)
	b.mustCLI("apply", stack)

	var mu sync.Mutex
	served := map[int][]string{}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		for _, port := range []int{18101, 18102} {
			wg.Add(1)
			go func(port int) {
				defer wg.Done()
				code, body := wake(port)
				mu.Lock()
				if code == http.StatusOK {
					served[port] = append(served[port], body)
				}
				mu.Unlock()
			}(port)
		}
	}
	awakeBoth := false
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if hostState(a) == messages.HostAwake && hostState(b) == messages.HostAwake {
				awakeBoth = true
			}
		}
	}()
	wg.Wait()
	close(done)
	if awakeBoth {
		t.Fatal("the host was awake on both nodes at once")
	}
	if len(served) != 1 {
		t.Fatalf("requests were served by %d nodes (%v); want exactly one", len(served), served)
	}
	holder, other, holderPort, otherPort := a, b, 18101, 18102
	if _, ok := served[18102]; ok {
		holder, other, holderPort, otherPort = b, a, 18102, 18101
	}
	pids := map[string]bool{}
	for _, body := range served[holderPort] {
		if i := strings.Index(body, "pid "); i >= 0 {
			pids[strings.TrimSpace(body[i:])] = true
		}
	}
	if len(pids) != 1 {
		t.Fatalf("served by %d instances: %v", len(pids), pids)
	}

	dieNode(holder)
	died := time.Now()
	other.eventually("the other node takes over", 2*time.Minute, func() bool {
		code, body := wake(otherPort)
		return code == http.StatusOK && strings.Contains(body, "hello from notes")
	})
	if took := time.Since(died); took < 25*time.Second {
		t.Fatalf("took over after %s, before the lease's TTL could pass", took)
	}
}

// ACT-14 on one shared fs directory.
func TestACT14TwoDaemonsSharedFS(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	twoDaemons(t, fmt.Sprintf("objstore: {kind: fs, prefix: act14, fs: {dir: %s}}\n", shared))
}

// ACT-14 on one MinIO bucket.
func TestACT14TwoDaemonsSharedMinIO(t *testing.T) {
	endpoint := os.Getenv("ENGENHO_S3_ENDPOINT")
	drivertest.Need(t, "s3", endpoint != "", "ENGENHO_S3_ENDPOINT not set (bash .ci/minio.sh start)")
	t.Parallel()
	twoDaemons(t, fmt.Sprintf("objstore: {kind: s3, prefix: act14-%d, s3: {endpoint: %q, region: %q, bucket: %q, path_style: true, access_key: %q, secret_key: %q}}\n",
		time.Now().UnixNano(), endpoint, os.Getenv("ENGENHO_S3_REGION"), os.Getenv("ENGENHO_S3_BUCKET"),
		os.Getenv("ENGENHO_S3_ACCESS_KEY"), os.Getenv("ENGENHO_S3_SECRET_KEY")))
}
