package faultproxy_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/engenho/engenho/chaos/faultproxy"
	"github.com/engenho/engenho/drivers/clock"
)

// CHS-2: with nothing armed the proxy is transparent: keep-alive on both
// sides, bodies streamed both ways, the Host header kept.
func TestPassThroughKeepAliveAndStreaming(t *testing.T) {
	p, b := tcpProxy(t, nil)
	c := newClient(t, false)
	reused := 0
	for i := range 20 {
		var got bool
		ctx := httptrace.WithClientTrace(bg, &httptrace.ClientTrace{GotConn: func(ci httptrace.GotConnInfo) { got = ci.Reused }})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/blob?n=100000", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(body, blob(100000)) {
			t.Fatalf("GET %d: %d bytes, err %v", i, len(body), err)
		}
		if got {
			reused++
		}
	}
	if reused != 19 {
		t.Errorf("client reused its connection %d times of 19", reused)
	}
	if n := b.conns.Load(); n != 1 {
		t.Errorf("the proxy opened %d connections to the backend for 20 sequential requests, want 1", n)
	}
	b.mu.Lock()
	host := b.hosts[0]
	b.mu.Unlock()
	if host != p.Addr() {
		t.Errorf("backend saw Host %q, want the proxy's %q (SigV4 signs it)", host, p.Addr())
	}

	// A large upload streams through whole.
	big := blob(8 << 20)
	resp, err := c.Post(p.URL()+"/echo", "application/octet-stream", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	echo, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf("%x %d", sha256.Sum256(big), len(big)); string(echo) != want {
		t.Errorf("upload through the proxy: backend read %q, want %q", echo, want)
	}

	// A streaming answer: the first line arrives while the backend still
	// holds the second (a long-poll would hang here if the proxy buffered).
	resp, err = c.Get(p.URL() + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); line != "first\n" || err != nil {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(b.release)
	if line, err := br.ReadString('\n'); line != "second\n" || err != nil {
		t.Fatalf("second line %q, %v", line, err)
	}
	if st := p.Stats(); st.Requests != 22 || st.Forwarded != 22 {
		t.Errorf("stats %+v, want 22 requests, all forwarded", st)
	}
}

// CHS-2: a status fault answers its count of matching requests itself
// (S3's SlowDown body), then requests pass again.
func TestStatusFaultCountAndFilter(t *testing.T) {
	p, b := tcpProxy(t, nil)
	c := newClient(t, false)
	mustArm(t, p, faultproxy.S3SlowDown().Times(2).On(http.MethodPut, "/echo"))

	if resp, _, err := get(c, p.URL()+"/blob?n=10"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a GET (not matching) got %v %v", resp, err)
	}
	put := func() (int, string) {
		req, _ := http.NewRequest(http.MethodPut, p.URL()+"/echo", strings.NewReader("hello"))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for i := range 2 {
		code, body := put()
		if code != 503 || !strings.Contains(body, "<Code>SlowDown</Code>") {
			t.Fatalf("PUT %d: %d %q, want 503 SlowDown", i+1, code, body)
		}
	}
	if code, body := put(); code != 200 || !strings.HasSuffix(body, " 5") {
		t.Fatalf("PUT 3: %d %q, want it forwarded", code, body)
	}
	if n := b.hits.Load(); n != 2 {
		t.Errorf("backend saw %d requests, want 2 (the GET and the third PUT)", n)
	}
	st := p.Stats()
	if st.Applied[faultproxy.Status] != 2 || st.Requests != 4 || st.Forwarded != 2 {
		t.Errorf("stats %+v, want 4 requests, 2 forwarded, 2 status faults", st)
	}
	if a := p.Armed(); len(a) != 0 {
		t.Errorf("a spent fault is still armed: %+v", a)
	}
}

// CHS-2: a count holds exactly under concurrent requests.
func TestStatusFaultCountIsExactUnderConcurrency(t *testing.T) {
	p, _ := tcpProxy(t, nil)
	c := newClient(t, false)
	mustArm(t, p, faultproxy.S3InternalError().Times(3))
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			resp, _, err := get(c, p.URL()+"/blob?n=1000")
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			codes[resp.StatusCode]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[500] != 3 || codes[200] != 17 {
		t.Errorf("answers %v, want 3×500 and 17×200", codes)
	}
}

// CHS-2: latency holds a request on the proxy's clock until it passes;
// During ends a fault on that clock.
func TestLatencyFault(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, b := tcpProxy(t, clk)
	c := newClient(t, false)
	mustArm(t, p, faultproxy.LatencyFault(5*time.Second).Times(1))
	done := make(chan error, 1)
	go func() {
		_, _, err := get(c, p.URL()+"/blob?n=10")
		done <- err
	}()
	if !clk.WaitForTimers(1, time.Minute) {
		t.Fatal("the request never waited on the clock")
	}
	if n := b.hits.Load(); n != 0 {
		t.Fatalf("backend saw %d requests while the latency held the first", n)
	}
	clk.Advance(5 * time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Spent: the next request waits on nothing.
	if _, _, err := get(c, p.URL()+"/blob?n=10"); err != nil || clk.Pending() != 0 {
		t.Fatalf("second request: %v, %d timers pending", err, clk.Pending())
	}

	// A latency for a time applies to every request until it ends.
	mustArm(t, p, faultproxy.LatencyFault(time.Second).During(time.Minute))
	go func() {
		_, _, err := get(c, p.URL()+"/blob?n=10")
		done <- err
	}()
	if !clk.WaitForTimers(2, time.Minute) { // the window and the delay
		t.Fatal("the request never waited on the clock")
	}
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if a := p.Armed(); len(a) != 0 {
		t.Fatalf("fault still armed after its window: %+v", a)
	}
	if st := p.Stats(); st.Applied[faultproxy.Latency] != 2 {
		t.Errorf("latency applied %d times, want 2", st.Applied[faultproxy.Latency])
	}
}

// CHS-2: reset forwards the request, then cuts the connection with a TCP
// reset after the given body bytes; with BeforeHeaders the client gets no
// byte at all although the backend did the work.
func TestResetFault(t *testing.T) {
	p, b := tcpProxy(t, nil)
	mustArm(t, p, faultproxy.ResetFault(1000).Times(1))
	resp, err := newClient(t, true).Get(p.URL() + "/blob?n=1000000")
	if err != nil {
		t.Fatalf("headers should arrive before the cut: %v", err)
	}
	if resp.StatusCode != 200 || resp.ContentLength != 1000000 {
		t.Fatalf("status %d, length %d", resp.StatusCode, resp.ContentLength)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading the body: %v, want connection reset", err)
	}
	if len(body) > 1000 || !bytes.Equal(body, blob(1000)[:len(body)]) {
		t.Fatalf("got %d bytes before the reset, want at most 1000 good ones", len(body))
	}

	mustArm(t, p, faultproxy.ResetFault(faultproxy.BeforeHeaders).Times(1))
	before := b.hits.Load()
	_, err = newClient(t, true).Get(p.URL() + "/blob?n=10")
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Fatalf("GET: %v, want a reset or EOF before any answer", err)
	}
	if b.hits.Load() != before+1 {
		t.Fatal("the request was not forwarded before the cut")
	}
	if st := p.Stats(); st.Applied[faultproxy.Reset] != 2 || st.Cut != 2 {
		t.Errorf("stats %+v, want 2 resets, 2 connections cut", st)
	}
}

// CHS-2: truncate ends a GET's body early with a clean close: the client
// sees fewer bytes than Content-Length (unexpected EOF), not a reset. Other
// methods and error answers are left alone and do not use up the count.
func TestTruncateFault(t *testing.T) {
	p, _ := tcpProxy(t, nil)
	c := newClient(t, false)
	mustArm(t, p, faultproxy.TruncateFault(faultproxy.Half).Times(1))

	if resp, _, err := get(c, p.URL()+"/nothing-here"); err != nil || resp.StatusCode != 404 {
		t.Fatalf("404: %v %v", resp, err)
	}
	resp, err := c.Post(p.URL()+"/echo", "text/plain", strings.NewReader("abc"))
	if err != nil {
		t.Fatal(err)
	}
	if body, err := io.ReadAll(resp.Body); err != nil || !strings.HasSuffix(string(body), " 3") {
		t.Fatalf("POST body %q, %v: must not be truncated", body, err)
	}
	resp.Body.Close()
	if len(p.Armed()) != 1 {
		t.Fatal("the count was used by a request it does not apply to")
	}

	resp, body, err := get(c, p.URL()+"/blob?n=100000")
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("reading a truncated body: %v, want unexpected EOF", err)
	}
	if resp.ContentLength != 100000 || len(body) != 50000 || !bytes.Equal(body, blob(50000)) {
		t.Fatalf("Content-Length %d, got %d bytes, want the first 50000 of 100000", resp.ContentLength, len(body))
	}
	if _, body, err := get(c, p.URL()+"/blob?n=100000"); err != nil || len(body) != 100000 {
		t.Fatalf("after the fault: %d bytes, %v", len(body), err)
	}
	if st := p.Stats(); st.Applied[faultproxy.Truncate] != 1 || st.Cut != 0 {
		t.Errorf("stats %+v, want 1 truncation and no reset", st)
	}
}

// CHS-2: down refuses connections (the listener is closed) and cuts the
// open ones, then listens again on the same address.
func TestDownFault(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, _ := tcpProxy(t, clk)
	c := newClient(t, false)
	if _, _, err := get(c, p.URL()+"/blob?n=10"); err != nil {
		t.Fatal(err)
	}
	// An answer in flight when it goes down.
	resp, err := c.Get(p.URL() + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}

	mustArm(t, p, faultproxy.DownFault(30*time.Second))
	if !p.Down() {
		t.Fatal("not down")
	}
	if _, err := br.ReadString('\n'); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the answer in flight: %v, want connection reset", err)
	}
	if _, err := net.Dial("tcp", p.Addr()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dialing while down: %v, want connection refused", err)
	}
	if _, _, err := get(c, p.URL()+"/blob?n=10"); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("a request while down: %v, want connection refused", err)
	}

	clk.Advance(30 * time.Second)
	if p.Down() {
		t.Fatal("still down after its window")
	}
	if _, body, err := get(c, p.URL()+"/blob?n=10"); err != nil || len(body) != 10 {
		t.Fatalf("after the window: %v", err)
	}
	if st := p.Stats(); st.Applied[faultproxy.Down] != 1 || st.Cut < 1 {
		t.Errorf("stats %+v, want 1 down window and the open connection cut", st)
	}
}

// CHS-2: a blackhole accepts and never answers: a client with a deadline
// times out, the backend never sees the request; an answer already
// streaming stalls and resumes when the blackhole ends; a request held when
// it ends has its connection cut, never an answer.
func TestBlackholeFault(t *testing.T) {
	p, b := tcpProxy(t, nil)
	c := newClient(t, false)

	// An answer streaming before the blackhole.
	resp, err := c.Get(p.URL() + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	hitsBefore := b.hits.Load()

	id := mustArm(t, p, faultproxy.BlackholeFault(0))
	timed := &http.Client{Transport: c.Transport, Timeout: 300 * time.Millisecond}
	_, _, err = get(timed, p.URL()+"/blob?n=10")
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a request into the blackhole: %v, want a timeout", err)
	}

	// The streaming answer's second line is written by the backend but
	// held by the proxy.
	second := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		second <- line
	}()
	close(b.release)
	<-b.streamd
	select {
	case line := <-second:
		t.Fatalf("the streaming answer went on during the blackhole: %q", line)
	case <-time.After(200 * time.Millisecond):
	}

	// A request that waits without a deadline, held when the blackhole ends.
	held := make(chan error, 1)
	go func() {
		_, _, err := get(newClient(t, true), p.URL()+"/blob?n=10")
		held <- err
	}()
	eventually(t, "holding the second request", func() bool { return p.Stats().Applied[faultproxy.Blackhole] == 2 })
	if b.hits.Load() != hitsBefore {
		t.Fatal("a request reached the backend through the blackhole")
	}

	p.Disarm(id)
	if line := <-second; line != "second\n" {
		t.Fatalf("after the blackhole the stream gave %q", line)
	}
	if err := <-held; err == nil {
		t.Fatal("a request held by the blackhole got an answer")
	}
	if _, body, err := get(c, p.URL()+"/blob?n=10"); err != nil || len(body) != 10 {
		t.Fatalf("after the blackhole: %v", err)
	}
}

// CHS-2: path and method filters select the requests a fault acts on.
func TestFaultFilters(t *testing.T) {
	p, _ := tcpProxy(t, nil)
	c := newClient(t, false)
	mustArm(t, p, faultproxy.S3SlowDown().On(http.MethodGet, "/blob"))
	if resp, _, _ := get(c, p.URL()+"/stream-nope"); resp == nil || resp.StatusCode != 404 {
		t.Fatalf("another path: %v", resp)
	}
	resp, err := c.Post(p.URL()+"/blob", "text/plain", nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("another method: %v %v", resp, err)
	}
	resp.Body.Close()
	for range 3 { // no count: every match until disarmed
		if resp, _, _ := get(c, p.URL()+"/blob?n=1"); resp == nil || resp.StatusCode != 503 {
			t.Fatalf("a matching request: %v", resp)
		}
	}
	p.Clear()
	if resp, _, _ := get(c, p.URL()+"/blob?n=1"); resp == nil || resp.StatusCode != 200 {
		t.Fatalf("after Clear: %v", resp)
	}
}

// Faults that make no sense are refused with the reason.
func TestArmRefusesBadFaults(t *testing.T) {
	p, _ := tcpProxy(t, nil)
	for _, f := range []faultproxy.Fault{
		{Kind: "explode"},
		{Kind: faultproxy.Status, Code: 42},
		{Kind: faultproxy.Latency},
		faultproxy.DownFault(time.Second).Times(2),
		faultproxy.DownFault(time.Second).On("GET", ""),
		faultproxy.BlackholeFault(0).Times(1),
		faultproxy.ResetFault(-2),
		faultproxy.LatencyFault(time.Second).Times(-1),
	} {
		if _, err := p.Arm(f); err == nil {
			t.Errorf("armed %+v", f)
		}
	}
	if len(p.Armed()) != 0 {
		t.Error("a refused fault is armed")
	}
}

// Close ends held requests and cuts connections; Arm after Close fails.
func TestCloseEndsEverything(t *testing.T) {
	p, _ := tcpProxy(t, nil)
	mustArm(t, p, faultproxy.BlackholeFault(0))
	held := make(chan error, 1)
	go func() {
		_, _, err := get(newClient(t, true), p.URL()+"/blob?n=10")
		held <- err
	}()
	eventually(t, "holding the request", func() bool { return p.Stats().Applied[faultproxy.Blackhole] == 1 })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err == nil {
		t.Fatal("a held request was answered at Close")
	}
	if _, err := p.Arm(faultproxy.S3SlowDown()); err == nil {
		t.Fatal("armed a closed proxy")
	}
}
