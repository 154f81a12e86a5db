package chaos

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/engenho/engenho/chaos/schedule"
)

// garbage is one kind of junk a connection sends (CHS-2).
var garbage = []string{"random bytes", "malformed lines", "bad requests", "an oversized line", "a cut line", "an idle connection"}

// injectGarbage opens conns connections to the control socket and sends
// junk on each, drawn from the fault's pick; an idle connection stays
// open until the fault is over.
func (c *campaign) injectGarbage(ctx context.Context, f schedule.Fault, inj *injected) error {
	rng := rand.New(rand.NewPCG(uint64(f.Pick), 0x676172))
	inj.target = c.a.socket()
	var kinds []string
	var idle []net.Conn
	for i := range max(1, f.Param("conns")) {
		kind := rng.IntN(len(garbage))
		kinds = append(kinds, garbage[kind])
		conn, err := net.DialTimeout("unix", c.a.socket(), 2*time.Second)
		if err != nil {
			return fmt.Errorf("connection %d: %w", i, err)
		}
		if kind == 5 {
			idle = append(idle, conn)
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write(junk(rng, kind))
		if kind != 4 {
			// Read the answers for a moment; a connection the server
			// keeps open is then closed by us.
			_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			drain(conn)
		}
		_ = conn.Close()
	}
	inj.detail = strings.Join(kinds, ", ")
	inj.cleanup = func(context.Context) string {
		for _, conn := range idle {
			_ = conn.Close()
		}
		return ""
	}
	return nil
}

// junk builds one connection's garbage.
func junk(rng *rand.Rand, kind int) []byte {
	var b bytes.Buffer
	switch kind {
	case 0:
		n := 1 + rng.IntN(64<<10)
		for range n {
			b.WriteByte(byte(rng.UintN(256)))
		}
		b.WriteByte('\n')
	case 1:
		for i := range 70 { // past the server's 64 malformed lines in a row
			fmt.Fprintf(&b, "{\"id\": %d, \"op\": \n", i)
		}
	case 2:
		lines := []string{`{"id":1,"op":"no-such-op"}`, `{"id":2,"op":"scale","args":{"stack":"../etc","service":"x","replicas":-1}}`,
			`{"id":3,"op":"status","args":{"stack":42}}`, `{"op":"status"}`, `{"id":4,"op":"chaos","args":{"kind":"panic","target":"root/../x"}}`,
			`{"id":5,"op":"cancel","args":{"id":99}}`, `[1,2,3]`, `null`, `{"id":6,"op":"status"}`, `{"id":6,"op":"status"}`}
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	case 3:
		b.WriteString(`{"id":1,"op":"status","args":{"stack":"`)
		b.Write(bytes.Repeat([]byte("a"), 2<<20))
		b.WriteString("\"}}\n")
	case 4:
		b.WriteString(`{"id":1,"op":"apply","args":{"files":[{"name":"x.yaml","content":"name: x`)
	}
	return b.Bytes()
}

// drain reads what the server answers until it closes or the deadline.
func drain(conn net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		if _, err := conn.Read(buf); err != nil {
			return
		}
	}
}

// injectFlood opens conns connections at once (more than the server's
// 64) and pipelines requests status requests on each as fast as it can.
func (c *campaign) injectFlood(ctx context.Context, f schedule.Fault, inj *injected) error {
	conns, requests := max(1, f.Param("conns")), max(1, f.Param("requests"))
	inj.target = c.a.socket()
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered, busy, failed := 0, 0, 0
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b, err := floodOne(c.a.socket(), requests)
			mu.Lock()
			defer mu.Unlock()
			answered += a
			busy += b
			if err != nil {
				failed++
			}
		}()
	}
	wg.Wait()
	inj.detail = fmt.Sprintf("%d connections × %d requests: %d answers, %d busy, %d connections cut", conns, requests, answered, busy, failed)
	return ctx.Err()
}

// floodOne sends n status requests on one connection and counts the
// answers and the busy refusals.
func floodOne(socket string, n int) (answered, busy int, err error) {
	conn, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	go func() {
		w := bufio.NewWriter(conn)
		for i := 1; i <= n; i++ {
			fmt.Fprintf(w, "{\"id\":%d,\"op\":\"status\"}\n", i)
		}
		_ = w.Flush()
	}()
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() && answered+busy < n {
		line := sc.Bytes()
		switch {
		case bytes.Contains(line, []byte(`"more":true`)):
		case bytes.Contains(line, []byte(`"code":"busy"`)):
			busy++
		default:
			answered++
		}
	}
	return answered, busy, sc.Err()
}
