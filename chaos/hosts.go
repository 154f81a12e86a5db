package chaos

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/engenho/engenho/chaos/faultproxy"
	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/chaos/report"
	"github.com/engenho/engenho/chaos/schedule"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/objstore"
	"github.com/engenho/engenho/drivers/objstore/checkpoint"
	"github.com/engenho/engenho/drivers/objstore/fs"
	"github.com/engenho/engenho/drivers/objstore/s3"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/control"
)

// Hibernating hosts run on pairs of nodes sharing one object store (ACT-14):
// the fs pair always, the s3 pair when an S3 server is present. Each pair
// runs one host, a stateful counter: every request answers "visit N",
// kept in its data directory, checkpointed within a second of each change
// (replication: stream) and at every sleep.
const (
	hostName   = "notes.chaos"
	hostIdle   = 3 * time.Second
	svcParkFS  = "park/notes"
	svcParkS3  = "parks3/notes"
	pairFS     = "fs"
	pairS3     = "s3"
	hostLeaseW = 35 * time.Second // a lease TTL (30s) and some
)

// hostPair is two nodes and the store they share.
type hostPair struct {
	kind    string // fs or s3
	stack   string
	nodes   []*node
	edges   []string
	store   objstore.Store // the campaign's own view of the shared store
	prefix  string
	closeFn func() error
	// proxies stand between each node and MinIO (the S3 pair only): the
	// S3 faults act on the wire, below the SDK (issue 18).
	proxies []*faultproxy.Proxy
	// lastVisit is the last visit number a request got back; ambiguous
	// counts requests whose outcome the campaign could not see (they may
	// have counted a visit).
	lastVisit, ambiguous int
	// mayLose is how many acknowledged visits a lost lease may take with
	// it: the host stands down without a final checkpoint (ACT-6), so the
	// visits of the last second, not yet streamed, are gone by design.
	mayLose int
	// checked counts the visits checked (daemon.kill-awake tells the
	// takeover visit by it).
	checked int
}

func (p *hostPair) service() string { return p.stack + "/notes" }

func (p *hostPair) stackFile(run, replication string) string {
	return fmt.Sprintf(`name: %s
services:
  notes:
    command: ["${ENGENHO_BIN}", "demo-counter"]
    env: {CHAOS_RUN: %q}
    ports: ["80"]
    healthcheck:
      http: {path: /healthz}
      interval: 1s
      timeout: 1s
      start_interval: 100ms
    hibernate:
      host: %s
      idle: %s
      replication: %s
      seed: ["/bin/sh", "-c", "mkdir -p \"$ENGENHO_DATA_DIR\" && echo seeded > \"$ENGENHO_DATA_DIR/seed.txt\""]
    sidecars:
      - name: ticker
        command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"]
        stop_grace_period: 1s
    stop_grace_period: 2s
%s`, p.stack, run, hostName, hostIdle, replication, ladderBlock)
}

// startPairs starts the host pairs the machine allows. A pair that does
// not come up means the daemon runs no hosts: host faults are left out.
func (c *campaign) startPairs(ctx context.Context) error {
	kinds := []string{pairFS}
	if c.comps.s3 {
		kinds = append(kinds, pairS3)
	}
	for _, kind := range kinds {
		p, err := c.startPair(ctx, kind)
		if err != nil {
			return fmt.Errorf("host pair %s: %w", kind, err)
		}
		c.pairs = append(c.pairs, p)
	}
	return nil
}

func (c *campaign) startPair(ctx context.Context, kind string) (*hostPair, error) {
	p := &hostPair{kind: kind, stack: "park"}
	if kind == pairS3 {
		p.stack = "parks3"
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	p.edges = []string{fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])}
	p.prefix = "chaos-" + c.run
	if err := c.openPairStore(ctx, p); err != nil {
		return nil, err
	}
	for i := range 2 {
		n, err := c.newHostNode(fmt.Sprintf("%s%d", kind, i+1), p, p.edges[i])
		if err != nil {
			return nil, err
		}
		p.nodes = append(p.nodes, n)
		if err := n.start(ctx); err != nil {
			return nil, err
		}
		if _, err := c.apply(ctx, n, []control.ApplyFile{{Name: p.stack + ".yaml", Content: p.stackFile(c.run, c.replication())}}); err != nil {
			return nil, fmt.Errorf("deploying the host: %w", err)
		}
	}
	// The first wake is a first boot (the seed runs); it must serve. A 503
	// is retried like any client honouring Retry-After would: the store
	// may be slow to answer its first requests (MinIO answers SlowDown
	// while busy).
	n, err := c.visitPatiently(ctx, p, 0)
	if err != nil {
		return nil, fmt.Errorf("the first wake: %w", err)
	}
	if vs := p.checkVisit(n); len(vs) > 0 {
		return nil, fmt.Errorf("the first wake: %s", vs[0].Evidence)
	}
	return p, nil
}

// openPairStore opens the campaign's own view of the pair's store, to
// check checkpoints (CHS-3).
func (c *campaign) openPairStore(ctx context.Context, p *hostPair) error {
	if p.kind == pairFS {
		dir := c.work + "/store-fs"
		st, err := fs.Open(dir, fs.Options{})
		if err != nil {
			return err
		}
		p.store, p.closeFn = st, st.Close
		return nil
	}
	st, err := s3.New(ctx, s3Config())
	if err != nil {
		return err
	}
	p.store, p.closeFn = st, st.Close
	return nil
}

func s3Config() s3.Config {
	return s3.Config{Endpoint: os.Getenv("ENGENHO_S3_ENDPOINT"), Bucket: envOr("ENGENHO_S3_BUCKET", "engenho-test"),
		Region: envOr("ENGENHO_S3_REGION", "us-east-1"), AccessKey: os.Getenv("ENGENHO_S3_ACCESS_KEY"),
		SecretKey: drivers.Secret(os.Getenv("ENGENHO_S3_SECRET_KEY")), PathStyle: true}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// newHostNode makes a node of a pair: chaos enabled, an edge, the pair's
// store. S3 credentials go to the daemon through its environment, never a
// file (SEC-2).
func (c *campaign) newHostNode(name string, p *hostPair, edge string) (*node, error) {
	n, err := c.newNode(name, c.sc.Plant)
	if err != nil {
		return nil, err
	}
	store := fmt.Sprintf(`{"kind": "fs", "prefix": %q, "fs": {"dir": "../store-fs"}}`, p.prefix)
	if p.kind == pairS3 {
		cfg := s3Config()
		px, err := s3Proxy(cfg.Endpoint)
		if err != nil {
			return nil, err
		}
		p.proxies = append(p.proxies, px)
		store = fmt.Sprintf(`{"kind": "s3", "prefix": %q, "s3": {"endpoint": %q, "bucket": %q, "region": %q, "path_style": true}}`,
			p.prefix, px.URL(), cfg.Bucket, cfg.Region)
		n.env = append(n.env, "ENGENHO_OBJSTORE_S3_ACCESS_KEY="+cfg.AccessKey, "ENGENHO_OBJSTORE_S3_SECRET_KEY="+os.Getenv("ENGENHO_S3_SECRET_KEY"))
	}
	n.config = c.nodeConfig(name, store, edge, false)
	return n, n.writeConfig()
}

// statusError is an edge's answer other than 200.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.body) }

var visitRE = regexp.MustCompile(`visit (\d+)`)

// visit sends one request through node i's edge and returns the visit
// number it got. A request that fails after it may have reached the
// instance is counted as ambiguous.
func (c *campaign) visit(ctx context.Context, p *hostPair, i int, limit time.Duration) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, "http://"+p.edges[i]+"/", nil)
	if err != nil {
		return 0, err
	}
	req.Host = hostName
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		p.ambiguous++
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		// 503 (asleep, held, waking failed) and 404 never reach the
		// instance; anything else (a 502 from the proxy) may have.
		if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusNotFound {
			p.ambiguous++
		}
		return 0, &statusError{code: resp.StatusCode, body: strings.TrimSpace(string(body))}
	}
	m := visitRE.FindSubmatch(body)
	if m == nil {
		return 0, fmt.Errorf("no visit number in %q", body)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n, nil
}

// checkVisit: a visit after the last one the campaign saw must be the
// next one (or, after requests whose outcome it could not see, within
// those): a lower or repeated number means state that was checkpointed
// and acknowledged is lost (CHS-3).
func (p *hostPair) checkVisit(n int) []invariant.Violation {
	lo, hi := p.lastVisit+1-p.mayLose, p.lastVisit+1+p.ambiguous
	p.lastVisit, p.ambiguous, p.mayLose = n, 0, 0
	p.checked++
	if n >= lo && n <= hi {
		return nil
	}
	return []invariant.Violation{{Invariant: invariant.CheckpointIntact, Subject: hostName, Safety: true,
		Evidence: fmt.Sprintf("the host answered visit %d; the last acknowledged visit was %d, so the next must be %d..%d: checkpointed state was lost", n, lo-1, lo, hi)}}
}

// checkCheckpoint reads the host's current checkpoint from the store:
// its archive must match the manifest's checksum and hold the last
// acknowledged visit count (CHS-3: no checkpoint lost or corrupted).
func (c *campaign) checkCheckpoint(ctx context.Context, p *hostPair) []invariant.Violation {
	bad := func(format string, args ...any) []invariant.Violation {
		return []invariant.Violation{{Invariant: invariant.CheckpointIntact, Subject: hostName, Safety: true, Evidence: fmt.Sprintf(format, args...)}}
	}
	cp, err := checkpoint.New(checkpoint.Config{Store: p.store, Prefix: p.prefix})
	if err != nil {
		return bad("%v", err)
	}
	head, err := cp.Load(ctx, hostName)
	if err != nil {
		return bad("reading the manifest: %v", err)
	}
	cur := head.Manifest.Current
	if cur == nil {
		return bad("no checkpoint after the host slept")
	}
	if cur.Format == checkpoint.Cas {
		return p.checkCasCheckpoint(ctx, cp, *cur)
	}
	obj, err := p.store.Get(ctx, cur.Key)
	if err != nil {
		return bad("the current checkpoint %s: %v", cur.Key, err)
	}
	defer obj.Body.Close()
	h := sha256.New()
	count, err := countIn(io.TeeReader(obj.Body, h), cur.Format)
	if err != nil {
		return bad("the current checkpoint %s does not unpack: %v", cur.Key, err)
	}
	if _, err := io.Copy(h, obj.Body); err != nil {
		return bad("reading %s: %v", cur.Key, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != cur.SHA256 {
		return invariant.CheckCheckpoint(hostName, cur.SHA256, sum)
	}
	if p.ambiguous == 0 && count != p.lastVisit {
		return bad("the current checkpoint %s holds visit %d, the last acknowledged visit is %d", cur.Key, count, p.lastVisit)
	}
	return nil
}

// countIn reads the visit count file from a checkpoint archive.
func countIn(r io.Reader, format checkpoint.Format) (int, error) {
	if format == checkpoint.TarGz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return 0, err
		}
		r = zr
	}
	tr := tar.NewReader(r)
	count := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return count, nil
		}
		if err != nil {
			return 0, err
		}
		if strings.TrimPrefix(hdr.Name, "./") == "count" {
			b, err := io.ReadAll(io.LimitReader(tr, 64))
			if err != nil {
				return 0, err
			}
			count, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
}

// hostViews reads every pair node's view of the host.
func (c *campaign) hostViews(ctx context.Context, p *hostPair) ([]invariant.HostView, error) {
	var out []invariant.HostView
	for _, n := range p.nodes {
		st, err := n.status(ctx)
		if err != nil {
			return out, fmt.Errorf("node %s: %w", n.name, err)
		}
		for _, h := range st.Hosts {
			out = append(out, invariant.HostView{Node: n.name, Host: h.Host, State: h.State, Fenced: h.Fenced, Busy: h.Busy})
		}
	}
	return out, nil
}

// quiet waits until the host sleeps on every node of the pair, then
// checks its checkpoint.
func (c *campaign) quiet(ctx context.Context, p *hostPair) ([]invariant.Violation, error) {
	deadline := c.clk.Now().Add(time.Minute)
	var vs []invariant.Violation
	for c.clk.Now().Before(deadline) {
		views, err := c.hostViews(ctx, p)
		vs = append(vs, invariant.CheckSingleAwake(views)...)
		if err == nil && allAsleep(views, len(p.nodes)) {
			return append(vs, c.checkCheckpoint(ctx, p)...), nil
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return vs, err
		}
	}
	return vs, errors.New("the host did not go to sleep within a minute")
}

// allAsleep: the host is asleep on every node with nothing in flight. A
// host actor restarted after a panic shows asleep at once, while its
// cleanup stops the instance the dead incarnation left and may resume it
// (seen in soak 424242: the checkpoint was checked, and a fault armed,
// in that window). Every one of the pair's nodes must show the host: a
// node whose host actor is being restarted may show none.
func allAsleep(views []invariant.HostView, nodes int) bool {
	for _, v := range views {
		if v.State != messages.HostAsleep || v.Busy != "" {
			return false
		}
	}
	return len(views) == nodes && nodes > 0
}

// pairOf finds the pair a host fault aims at.
func (c *campaign) pairOf(service string) *hostPair {
	for _, p := range c.pairs {
		if p.service() == service {
			return p
		}
	}
	return nil
}

// runHostFault runs a fault aimed at a host pair: quiet the pair, inject
// on one node, then wait until the host serves the next visit through
// the checking node, checking single-awake all along.
func (c *campaign) runHostFault(ctx context.Context, f schedule.Fault, res report.Result) report.Result {
	p := c.pairOf(f.Service)
	if p == nil {
		res.Skipped = "no host pair " + f.Service
		return res
	}
	vs, err := c.quiet(ctx, p)
	if err != nil {
		res.Skipped = err.Error()
		res.Violation = dedupe(vs)
		return res
	}
	x := int(f.Pick) % len(p.nodes)
	checker := x
	inj := &injected{target: p.nodes[x].name}
	err = c.injectHost(ctx, f, p, x, inj)
	if f.Kind == schedule.LeaseExpire || f.Kind == schedule.DaemonKillSleep || f.Kind == schedule.DaemonKillAwake || f.Kind == schedule.DaemonStopAwake ||
		f.Kind == schedule.S3Partition {
		checker = 1 - x // the other node takes over (ACT-14)
	}
	if err != nil {
		res.Skipped = "injection failed: " + err.Error()
	} else {
		res.Injected = true
	}
	res.Target = fmt.Sprintf("%s on %s", f.Service, inj.target)
	res.Detail = inj.detail
	start := c.clk.Now()
	ok, at, more := c.awaitHost(ctx, p, checker, start, c.sc.boundOf(f.Kind))
	vs = append(append(vs, inj.violations...), more...)
	if inj.cleanup != nil {
		if note := inj.cleanup(ctx); note != "" {
			res.Detail = strings.TrimPrefix(res.Detail+"; "+note, "; ")
		}
	}
	if res.Injected {
		res.Recovered = ok
		if ok {
			res.Recovery = report.Millis(at.Sub(start))
		}
	}
	res.Violation = dedupe(vs)
	return res
}

// injectHost performs a host fault on node x of the pair.
func (c *campaign) injectHost(ctx context.Context, f schedule.Fault, p *hostPair, x int, inj *injected) error {
	n := p.nodes[x]
	wake := func() error {
		v, err := c.visitPatiently(ctx, p, x)
		if err != nil {
			return fmt.Errorf("waking the host through %s: %w", n.name, err)
		}
		inj.violations = append(inj.violations, p.checkVisit(v)...)
		// Let the stream replication save the visit (≤1s, ACT-9), with a
		// second to spare, before the host's idle window (3s) ends.
		return sleep(ctx, 2*time.Second)
	}
	switch f.Kind {
	case schedule.PanicHost, schedule.PanicSidecar, schedule.PanicActivator:
		if f.Kind == schedule.PanicSidecar || f.Pick%2 == 0 {
			if err := wake(); err != nil {
				return err
			}
		}
		obs, err := c.observe(ctx, n, false)
		if err != nil {
			return err
		}
		cands := panicCandidates(f, obs)
		if len(cands) == 0 {
			return errSkip{"no live actor of the class on " + n.name}
		}
		path := cands[int(f.Pick/2)%len(cands)]
		inj.detail = path
		_, err = n.chaos(ctx, control.ChaosArgs{Kind: "panic", Target: path})
		return err
	case schedule.StoreError, schedule.StoreLatency, schedule.StoreConflict:
		params := map[string]string{"count": f.Params["count"]}
		switch f.Kind {
		case schedule.StoreError:
			params["mode"], params["op"], params["kind"] = "fail", f.Params["op"], "transient"
		case schedule.StoreLatency:
			params["mode"], params["op"], params["delay"] = "latency", f.Params["op"], f.Params["delay_ms"]+"ms"
		case schedule.StoreConflict:
			params["mode"], params["op"] = "conflict", "put"
		}
		if _, err := n.chaos(ctx, control.ChaosArgs{Kind: "store", Params: params}); err != nil {
			return err
		}
		inj.detail = fmt.Sprintf("%s %s ×%s, then a request", params["mode"], params["op"], params["count"])
		inj.cleanup = func(ctx context.Context) string { return c.clearOn(ctx, n) }
		vs, err := c.visitCounted(ctx, p, x)
		inj.violations = append(inj.violations, vs...)
		if err != nil {
			inj.detail += " (answered: " + err.Error() + ")"
		}
		return nil
	case schedule.LeaseExpire:
		if err := wake(); err != nil {
			return err
		}
		r, err := n.chaos(ctx, control.ChaosArgs{Kind: "expire-lease", Target: hostName})
		if err != nil {
			return err
		}
		inj.detail = r.Detail + "; " + c.keepAwake(ctx, p, x, inj)
		return nil
	case schedule.DaemonKillAwake:
		return c.injectKillAwake(ctx, f, p, x, inj)
	case schedule.DaemonStopAwake:
		return c.injectStopAwake(ctx, f, p, x, inj)
	case schedule.ClockJumpAwake:
		return c.injectClockJumpAwake(ctx, f, p, x, inj)
	case schedule.S3Error, schedule.S3Latency, schedule.S3Reset, schedule.S3Truncate:
		return c.injectS3(ctx, f, p, x, inj)
	case schedule.S3Partition:
		return c.injectS3Partition(ctx, f, p, x, inj)
	case schedule.S3Restart:
		return c.injectS3Restart(ctx, p, x, inj)
	case schedule.DaemonKillSleep:
		if err := wake(); err != nil {
			return err
		}
		state := ""
		deadline := c.clk.Now().Add(30 * time.Second)
		for c.clk.Now().Before(deadline) && state != string(messages.HostStopping) {
			st, err := n.status(ctx)
			if err == nil {
				for _, h := range st.Hosts {
					state = string(h.State)
				}
			}
			if err := sleep(ctx, 5*time.Millisecond); err != nil {
				return err
			}
		}
		inj.detail = "killed while the host was " + state
		return killAndRelaunch(n, inj)
	}
	return errSkip{"not a host fault"}
}

// visitPatiently is visit, retried while the host answers 503 (its lease
// held elsewhere, at most a TTL) for up to 45s.
func (c *campaign) visitPatiently(ctx context.Context, p *hostPair, i int) (int, error) {
	deadline := c.clk.Now().Add(hostLeaseW + 10*time.Second)
	for {
		v, err := c.visit(ctx, p, i, 40*time.Second)
		var se *statusError
		if err == nil || !errors.As(err, &se) || se.code != http.StatusServiceUnavailable || !c.clk.Now().Before(deadline) {
			return v, err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return 0, err
		}
	}
}

// visitCounted is visit with its number checked.
func (c *campaign) visitCounted(ctx context.Context, p *hostPair, i int) ([]invariant.Violation, error) {
	v, err := c.visit(ctx, p, i, 40*time.Second)
	if err != nil {
		return nil, err
	}
	return p.checkVisit(v), nil
}

func (c *campaign) clearOn(ctx context.Context, n *node) string {
	if _, err := n.chaos(ctx, control.ChaosArgs{Kind: "clear"}); err != nil {
		return "clearing the rules on " + n.name + " failed: " + err.Error()
	}
	return ""
}

// awaitHost waits until every pair node runs and the host serves its
// next visit through node i, checking that it is never awake on both.
func (c *campaign) awaitHost(ctx context.Context, p *hostPair, i int, start time.Time, bound time.Duration) (bool, time.Time, []invariant.Violation) {
	var vs []invariant.Violation
	var last error
	for c.clk.Since(start) < bound {
		views, err := c.hostViews(ctx, p)
		vs = append(vs, invariant.CheckSingleAwake(views)...)
		if err == nil {
			for _, n := range p.nodes {
				if err = n.running(ctx); err != nil {
					break
				}
			}
		}
		if err == nil {
			var more []invariant.Violation
			more, err = c.visitCounted(ctx, p, i)
			vs = append(vs, more...)
			if err == nil {
				return true, c.clk.Now(), vs
			}
		}
		last = err
		c.progress(start, []invariant.Violation{{Invariant: "host", Subject: hostName, Evidence: err.Error()}})
		if sleep(ctx, time.Second) != nil {
			// Interrupted (Ctrl-C): the bound did not pass, so nothing
			// can be said of the host (soak 424242 on 98f9748, fault 168,
			// reported an interrupt as "did not serve within 1m0s").
			return false, time.Time{}, vs
		}
	}
	return false, time.Time{}, append(vs, invariant.Violation{Invariant: invariant.Converged, Subject: hostName,
		Evidence: fmt.Sprintf("the host did not serve through %s within %s: %v", p.nodes[i].name, bound, last)})
}

// keepAwake keeps the host busy through node x with a request every
// 300ms, so it is awake when its next renew finds the lease expired
// (renews come every TTL/3), until a request fails or 15s pass. The
// visits of the last 2s before the stand-down may be lost (mayLose).
func (c *campaign) keepAwake(ctx context.Context, p *hostPair, x int, inj *injected) string {
	var times []time.Time
	deadline := c.clk.Now().Add(15 * time.Second)
	outcome := "the host kept serving through " + p.nodes[x].name
	for c.clk.Now().Before(deadline) {
		v, err := c.visit(ctx, p, x, 10*time.Second)
		if err != nil {
			outcome = fmt.Sprintf("stood down after %d requests: %v", len(times), err)
			break
		}
		p.mayLose = recentSince(times, c.clk.Now().Add(-2*time.Second))
		inj.violations = append(inj.violations, p.checkVisit(v)...)
		times = append(times, c.clk.Now())
		if sleep(ctx, 300*time.Millisecond) != nil {
			break
		}
	}
	p.mayLose = recentSince(times, c.clk.Now().Add(-2*time.Second))
	return outcome
}

func recentSince(ts []time.Time, since time.Time) int {
	n := 0
	for _, t := range ts {
		if t.After(since) {
			n++
		}
	}
	return n
}
