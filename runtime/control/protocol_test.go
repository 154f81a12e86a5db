package control_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
	"github.com/engenho/engenho/runtime/control/controltest"
)

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestDMN11MalformedLinesGetClearErrors: each malformed line gets a
// bad_request (or unknown_op) that says what is wrong, on the request's id
// when it could be read; the connection keeps working and the handler is
// never called.
func TestDMN11MalformedLinesGetClearErrors(t *testing.T) {
	f := newFake()
	s := serve(t, f, nil)
	r := dialRaw(t, s.path)
	cases := []struct {
		line string
		id   uint64
		code control.Code
		msg  string // a piece the message must hold
	}{
		{`not json`, 0, control.CodeBadRequest, "a request is a JSON object"},
		{`{"id":1,"op":"status"`, 0, control.CodeBadRequest, "not valid JSON"},
		{`{"op":"status"}`, 0, control.CodeBadRequest, "id: required"},
		{`{"id":"7","op":"status"}`, 0, control.CodeBadRequest, "id: want a positive integer"},
		{`{"id":-1,"op":"status"}`, 0, control.CodeBadRequest, "id: want a positive integer"},
		{`{"id":2}`, 2, control.CodeBadRequest, "op: required"},
		{`{"id":3,"op":7}`, 3, control.CodeBadRequest, "op: want a string, got a number"},
		{`{"id":4,"op":"frobnicate"}`, 4, control.CodeUnknownOp, `unknown op "frobnicate"`},
		{`{"id":5,"op":"status","extra":1}`, 5, control.CodeBadRequest, `unknown field "extra"`},
		{`{"id":6,"op":"scale","args":{"stack":"web","service":"api","replicas":"3"}}`, 6, control.CodeBadRequest, "args.replicas: want an integer, got string"},
		{`{"id":7,"op":"scale","args":{"stack":"web","service":"api","replicas":3,"force":true}}`, 7, control.CodeBadRequest, `args: unknown field "force"`},
		{`{"id":8,"op":"status","args":[1]}`, 8, control.CodeBadRequest, "args: want an object, got an array"},
		{`{"id":9,"op":"apply","args":{"files":[{"name":"a","content":"x","mode":1}]}}`, 9, control.CodeBadRequest, `args.files[0]: unknown field "mode"`},
		{`{"id":10,"op":"stop","args":{"hold":"yes"}}`, 10, control.CodeBadRequest, "args.hold: want a boolean"},
		{`{"id":11,"op":"status"} {"id":12}`, 0, control.CodeBadRequest, "not valid JSON"},
	}
	for _, tc := range cases {
		r.send(tc.line)
		resp := r.next()
		if resp.ID != tc.id || resp.Error == nil || resp.Error.Code != tc.code || !contains(resp.Error.Message, tc.msg) {
			t.Errorf("%s\n got id %d %+v\nwant id %d %s containing %q", tc.line, resp.ID, resp.Error, tc.id, tc.code, tc.msg)
		}
	}
	r.send(`{"id":100,"op":"status"}`)
	if resp := r.next(); resp.ID != 100 || resp.Error != nil || resp.Result == nil {
		t.Errorf("valid request after malformed ones: %+v", resp)
	}
	if calls := f.Calls(); len(calls) != 1 {
		t.Errorf("handler calls = %+v, want only the valid status", calls)
	}
}

// TestSEC3NamesAreValidatedBeforeTheHandler: names, allow-lists and bounds
// are checked by the server; the error names the field; the handler never
// sees the request.
func TestSEC3NamesAreValidatedBeforeTheHandler(t *testing.T) {
	f := &controltest.Fake{ChaosEnabled: true}
	s := serve(t, f, nil)
	r := dialRaw(t, s.path)
	cases := []struct {
		op, args, field string
	}{
		{"why", `{"stack":"../etc","service":"api"}`, "args.stack"},
		{"why", `{"stack":"web","service":"API"}`, "args.service"},
		{"why", `{"stack":"web"}`, "args.service"},
		{"why", `{"stack":"web","service":"api","slot":-1}`, "args.slot"},
		{"scale", `{"stack":"web","service":"api","replicas":100001}`, "args.replicas"},
		{"remove", `{"stack":"web/../x"}`, "args.stack"},
		{"rollback", `{"stack":""}`, "args.stack"},
		{"redeploy", `{"stack":"-web","service":"api"}`, "args.stack"},
		{"service-stop", `{"stack":"web","service":"a.b"}`, "args.service"},
		{"service-start", `{"stack":"web","service":"` + strings.Repeat("a", 64) + `"}`, "args.service"},
		{"logs", `{"stack":"web","service":"api","lines":1000000}`, "args.lines"},
		{"reinit", `{"what":"../../etc","epoch":1}`, "args.what"},
		{"epoch", `{"what":"everything"}`, "args.what"},
		{"restart-child", `{"path":"root/../x"}`, "args.path"},
		{"restart-child", `{"path":"root/a b"}`, "args.path"},
		{"apply", `{"files":[]}`, "args.files"},
		{"apply", `{"files":[{"name":"","content":"x"}]}`, "args.files[0].name"},
		{"apply", `{"files":[{"name":"a","content":""}]}`, "args.files[0].content"},
		{"apply", `{"files":[{"name":"a","content":"x"}],"dry_run":true,"wait":true}`, "args.wait"},
		{"apply", `{"files":[{"name":"a","content":"x","dir":"relative/dir"}]}`, "args.files[0].dir"},
		{"apply", `{"files":[{"name":"a","content":"x"}],"profiles":[""]}`, "args.profiles"},
		{"status", `{"service":"api"}`, "args.service"},
		{"chaos", `{"kind":"KILL"}`, "args.kind"},
		{"chaos", `{"kind":"kill","target":"../x"}`, "args.target"},
		{"events", `{"tail":-5}`, "args.tail"},
		{"cancel", `{}`, "args.id"},
	}
	for i, tc := range cases {
		r.send(fmt.Sprintf(`{"id":%d,"op":%q,"args":%s}`, i+1, tc.op, tc.args))
		resp := r.next()
		if resp.Error == nil || resp.Error.Code != control.CodeBadRequest || resp.Error.Details["field"] != tc.field || !strings.HasPrefix(resp.Error.Message, tc.field+":") {
			t.Errorf("%s %s: got %+v, want bad_request on %s", tc.op, tc.args, resp.Error, tc.field)
		}
	}
	if calls := f.Calls(); len(calls) != 0 {
		t.Errorf("the handler saw invalid requests: %+v", calls)
	}
}

// TestDMN11TooLargeClosesOnlyThatConnection: a line over the limit gets
// too_large and its connection is closed; another connection is served.
func TestDMN11TooLargeClosesOnlyThatConnection(t *testing.T) {
	f := newFake()
	s := serve(t, f, func(o *control.Options) { o.MaxRequest = 4096 })
	other := dialRaw(t, s.path)
	r := dialRaw(t, s.path)
	big := `{"id":1,"op":"apply","args":{"files":[{"name":"a","content":"` + strings.Repeat("x", 8000) + `"}]}}`
	r.send(big)
	resp := r.next()
	if resp.ID != 0 || resp.Error == nil || resp.Error.Code != control.CodeTooLarge || !contains(resp.Error.Message, "4096 bytes") {
		t.Fatalf("oversized line: %+v", resp.Error)
	}
	r.eof()
	other.send(`{"id":1,"op":"status"}`)
	if resp := other.next(); resp.Error != nil {
		t.Fatalf("other connection after a too_large: %+v", resp.Error)
	}
	// A line exactly at the limit is fine.
	exact := `{"id":2,"op":"status"}`
	exact = exact[:len(exact)-1] + strings.Repeat(" ", 4096-len(exact)) + "}"
	other.send(exact)
	if resp := other.next(); resp.ID != 2 || resp.Error != nil {
		t.Fatalf("line of exactly the limit: %+v", resp.Error)
	}
	if calls := f.Calls(); len(calls) != 2 {
		t.Errorf("calls = %d, want 2 status", len(calls))
	}
}

// TestDMN11HalfWrittenRequestAffectsNothing: a client that disconnects
// mid-line causes no call, and the server keeps serving.
func TestDMN11HalfWrittenRequestAffectsNothing(t *testing.T) {
	f := newFake()
	s := serve(t, f, nil)
	nc, err := net.Dial("unix", s.path)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte(`{"id":1,"op":"remove","args":{"stack":"web"`))
	nc.Close()
	c := dial(t, s.path)
	if _, err := c.Status(ctx(t), control.StatusArgs{}); err != nil {
		t.Fatal(err)
	}
	for _, call := range f.Calls() {
		if call.Op == control.OpRemove {
			t.Fatalf("a half-written remove reached the handler")
		}
	}
}

// TestDMN11PipelinedRequests: several requests in one write are all
// answered, each on its id.
func TestDMN11PipelinedRequests(t *testing.T) {
	s := serve(t, newFake(), nil)
	r := dialRaw(t, s.path)
	r.send(`{"id":1,"op":"status"}` + "\n" + `{"id":2,"op":"tree"}` + "\n" + `{"id":3,"op":"scale","args":{"stack":"a","service":"b","replicas":2}}`)
	got := map[uint64]bool{}
	for range 3 {
		resp := r.next()
		if resp.Error != nil {
			t.Fatalf("id %d: %+v", resp.ID, resp.Error)
		}
		got[resp.ID] = true
	}
	if !got[1] || !got[2] || !got[3] {
		t.Errorf("answered ids = %v", got)
	}
}

// TestDMN11InFlightBound: past MaxInFlight a request gets busy; a duplicate
// id in flight gets conflict; the held ones complete.
func TestDMN11InFlightBound(t *testing.T) {
	f := &controltest.Fake{Block: make(chan struct{})}
	s := serve(t, f, func(o *control.Options) { o.MaxInFlight = 2 })
	r := dialRaw(t, s.path)
	r.send(`{"id":1,"op":"status"}`)
	r.send(`{"id":1,"op":"tree"}`)
	if resp := r.next(); resp.ID != 1 || resp.Error == nil || resp.Error.Code != control.CodeConflict {
		t.Fatalf("duplicate id: %+v", resp)
	}
	r.send(`{"id":2,"op":"status"}`)
	r.send(`{"id":3,"op":"status"}`)
	if resp := r.next(); resp.ID != 3 || resp.Error == nil || resp.Error.Code != control.CodeBusy {
		t.Fatalf("third in flight: %+v", resp)
	}
	close(f.Block)
	got := map[uint64]bool{}
	for range 2 {
		resp := r.next()
		if resp.Error != nil {
			t.Fatalf("held request: %+v", resp)
		}
		got[resp.ID] = true
	}
	if !got[1] || !got[2] {
		t.Errorf("held requests answered: %v", got)
	}
}

// TestDMN11ConnectionBound: past MaxConns a connection gets busy and is
// closed; the others are served.
func TestDMN11ConnectionBound(t *testing.T) {
	s := serve(t, newFake(), func(o *control.Options) { o.MaxConns = 2 })
	a, b := dialRaw(t, s.path), dialRaw(t, s.path)
	// Make sure both are admitted before the third arrives.
	for _, r := range []*raw{a, b} {
		r.send(`{"id":1,"op":"status"}`)
		r.next()
	}
	third := dialRaw(t, s.path)
	resp := third.next()
	if resp.Error == nil || resp.Error.Code != control.CodeBusy {
		t.Fatalf("third connection: %+v", resp)
	}
	third.eof()
	a.send(`{"id":2,"op":"status"}`)
	if resp := a.next(); resp.Error != nil {
		t.Fatalf("admitted connection: %+v", resp.Error)
	}
}

// TestCHS2GarbageFloodLeavesTheDaemonServing: many connections sending
// garbage, oversized lines and half lines at once; afterwards a client is
// served normally and no garbage reached the handler.
func TestCHS2GarbageFloodLeavesTheDaemonServing(t *testing.T) {
	f := newFake()
	s := serve(t, f, func(o *control.Options) { o.MaxRequest = 1 << 16 })
	garbage := []string{
		"\x00\x01\x02\n", "{{{{\n", strings.Repeat("[", 70000), `{"id":1,"op":"exit","args":` + "\n",
		strings.Repeat("garbage\n", 100), `{"id":1`,
	}
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := net.Dial("unix", s.path)
			if err != nil {
				return // turned away at the bound: fine
			}
			defer nc.Close()
			nc.SetDeadline(time.Now().Add(wait))
			nc.Write([]byte(garbage[i%len(garbage)]))
			nc.(*net.UnixConn).CloseWrite() // the server sees the end of a half line
			buf := make([]byte, 4096)
			for {
				if _, err := nc.Read(buf); err != nil {
					return
				}
				if i%2 == 0 {
					return // half of them leave without reading everything
				}
			}
		}()
	}
	// The flood's connections end by themselves (EOF) or are closed by
	// the server (too_large, too many bad lines).
	c := dial(t, s.path)
	if _, err := c.Status(ctx(t), control.StatusArgs{}); err != nil {
		t.Fatalf("status during the flood: %v", err)
	}
	wg.Wait()
	if _, err := c.Status(ctx(t), control.StatusArgs{}); err != nil {
		t.Fatalf("status after the flood: %v", err)
	}
	for _, call := range f.Calls() {
		if call.Op != control.OpStatus {
			t.Errorf("garbage reached the handler: %+v", call)
		}
	}
}

// TestDMN11TooManyBadLinesCloses: a connection that sends only garbage is
// closed after 64 malformed lines in a row.
func TestDMN11TooManyBadLinesCloses(t *testing.T) {
	s := serve(t, newFake(), nil)
	r := dialRaw(t, s.path)
	r.send(strings.Repeat("nope\n", 63) + `{"id":1,"op":"status"}`)
	for range 63 {
		r.next()
	}
	if resp := r.next(); resp.ID != 1 || resp.Error != nil {
		t.Fatalf("a valid line resets the count: %+v", resp)
	}
	r.send(strings.Repeat("nope\n", 64))
	for range 64 {
		r.next()
	}
	resp := r.next()
	if resp.Error == nil || !contains(resp.Error.Message, "64 malformed requests in a row") {
		t.Fatalf("after 64 bad lines: %+v", resp)
	}
	r.eof()
}

// TestDMN11IdleTimeoutOnTheFakeClock: a connection with nothing in flight
// is closed after the idle timeout, with a timeout line; a request in
// flight (a follow stream) keeps it open however long it runs.
func TestDMN11IdleTimeoutOnTheFakeClock(t *testing.T) {
	clk := clock.NewFake(t0)
	f := &controltest.Fake{Feed: make(chan messages.Event)}
	// The write timeout is far beyond the test's clock moves, so a write
	// watchdog never fires here.
	s := serve(t, f, func(o *control.Options) {
		o.Clock = clk
		o.IdleTimeout = time.Minute
		o.WriteTimeout = 1000 * time.Hour
	})

	idle := dialRaw(t, s.path)
	idle.send(`{"id":1,"op":"status"}`)
	idle.next()
	if !clk.WaitForTimers(1, wait) {
		t.Fatal("no idle timer armed")
	}
	clk.Advance(59 * time.Second)
	idle.send(`{"id":2,"op":"status"}`) // activity re-arms the timer
	idle.next()
	clk.Advance(59 * time.Second)
	idle.send(`{"id":3,"op":"status"}`)
	if resp := idle.next(); resp.ID != 3 || resp.Error != nil {
		t.Fatalf("before the timeout: %+v", resp)
	}
	if !clk.WaitForTimers(1, wait) {
		t.Fatal("no idle timer re-armed")
	}
	clk.Advance(time.Minute)
	resp := idle.next()
	if resp.ID != 0 || resp.Error == nil || resp.Error.Code != control.CodeTimeout || !contains(resp.Error.Message, "idle for 1m0s") {
		t.Fatalf("idle connection: %+v", resp)
	}
	idle.eof()

	// A follow stream is not idle.
	follow := dialRaw(t, s.path)
	follow.send(`{"id":1,"op":"events","args":{"follow":true}}`)
	f.Feed <- messages.Event{Seq: 1, Message: "one"} // the stream is live
	if resp := follow.next(); resp.Event == nil || resp.Event.Seq != 1 {
		t.Fatalf("follow item: %+v", resp)
	}
	clk.Advance(time.Hour)
	f.Feed <- messages.Event{Seq: 2, Message: "two"}
	if resp := follow.next(); resp.Event == nil || resp.Event.Seq != 2 {
		t.Fatalf("follow after an hour: %+v", resp)
	}
}

// TestDMN11FollowEndsOnClientClose: the handler's stream ends when the
// client closes its connection.
func TestDMN11FollowEndsOnClientClose(t *testing.T) {
	h := &endSignal{Fake: &controltest.Fake{Feed: make(chan messages.Event)}, ended: make(chan struct{})}
	s := serve(t, h, nil)
	r := dialRaw(t, s.path)
	r.send(`{"id":1,"op":"events","args":{"follow":true}}`)
	h.Feed <- messages.Event{Seq: 1}
	r.next()
	r.nc.Close()
	select {
	case <-h.ended:
	case <-time.After(wait):
		t.Fatal("the follow stream did not end when the client closed")
	}
}

// TestDMN11FollowEndsOnCancel: the client's cancel (ctx done) ends the
// stream on the server and the client call returns at once.
func TestDMN11FollowEndsOnCancel(t *testing.T) {
	h := &endSignal{Fake: &controltest.Fake{Feed: make(chan messages.Event)}, ended: make(chan struct{})}
	s := serve(t, h, nil)
	c := dial(t, s.path)
	cctx, cancel := context.WithCancel(ctx(t))
	got := make(chan error, 1)
	go func() {
		_, err := c.Events(cctx, control.EventsArgs{Follow: true}, func(messages.Event) error { return nil })
		got <- err
	}()
	h.Feed <- messages.Event{Seq: 1}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled follow: %v", err)
	}
	select {
	case <-h.ended:
	case <-time.After(wait):
		t.Fatal("the server's stream did not end on cancel")
	}
	// The connection is still usable.
	if _, err := c.Status(ctx(t), control.StatusArgs{}); err != nil {
		t.Fatal(err)
	}
}

// TestDMN11CloseEndsStreams: Close ends a follow stream with a final
// unavailable line, closes connections, removes the socket, and leaks no
// goroutine (goleak in TestMain).
func TestDMN11CloseEndsStreams(t *testing.T) {
	h := &endSignal{Fake: &controltest.Fake{Feed: make(chan messages.Event)}, ended: make(chan struct{})}
	s := serve(t, h, nil)
	c := dial(t, s.path)
	got := make(chan error, 1)
	go func() {
		_, err := c.Events(ctx(t), control.EventsArgs{Follow: true}, func(messages.Event) error { return nil })
		got <- err
	}()
	h.Feed <- messages.Event{Seq: 1}
	idle := dialRaw(t, s.path)
	s.close()
	if err := <-got; !errors.Is(err, control.ErrUnavailable) {
		t.Fatalf("follow across Close: %v, want unavailable", err)
	}
	<-h.ended
	idle.eof()
	if _, err := control.Dial(s.path); !errors.Is(err, control.ErrNoDaemon) {
		t.Fatalf("dial after Close: %v, want no daemon", err)
	}
}

// endSignal closes ended when its Events returns.
type endSignal struct {
	*controltest.Fake
	ended chan struct{}
}

func (e *endSignal) Events(ctx context.Context, a control.EventsArgs, send func(messages.Event) error) (control.EventsResult, error) {
	defer close(e.ended)
	return e.Fake.Events(ctx, a, send)
}
