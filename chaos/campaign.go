package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/engenho/engenho/chaos/faultproxy"
	"github.com/engenho/engenho/chaos/inject"
	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/chaos/report"
	"github.com/engenho/engenho/chaos/schedule"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/runtime/control"
)

// Options configure a campaign.
type Options struct {
	Scenario string
	Seed     uint64
	Faults   int
	// Bin is the engenho binary the daemons run.
	Bin string
	// WorkDir holds the campaign's temporary directories (default the
	// system's temp dir).
	WorkDir string
	// ReportDir, when set, receives report.json and report.md.
	ReportDir string
	// Out receives the progress: seed, schedule, one line per fault,
	// every violation. Default io.Discard.
	Out io.Writer
	// Keep keeps the work directory (it is always kept after a violation).
	Keep bool
	// Require names components that must be present (ENGENHO_REQUIRE:
	// incus, s3); a missing one is an error.
	Require []string
	// Plant overrides the scenario's planted bug (self-test).
	Plant *inject.Plant
	// Kinds, when set, keeps only these kinds of the scenario's mix.
	Kinds []string
	// Verbose prints what a wait for recovery is still waiting for.
	Verbose bool
	// Clock is the wall clock unless a test gives another.
	Clock clock.Clock
}

// ErrSetup is the kind of every error that stops a campaign before its
// first fault (a missing binary, a required component absent, a daemon
// that does not come up).
var ErrSetup = errors.New("chaos campaign setup")

// poll is how often the campaign looks at the daemon while it waits for
// recovery.
const poll = 100 * time.Millisecond

// campaign is one run.
type campaign struct {
	opts   Options
	sc     Scenario
	clk    clock.Clock
	out    io.Writer
	run    string // the CHAOS_RUN marker
	work   string
	stacks stackSet
	want   invariant.Want
	a      *node
	// portBlocks counts the nodes given a host-port range of their own.
	portBlocks int
	pairs      []*hostPair
	// lossWindows are the losses measured by daemon.kill-awake (ACT-17).
	lossWindows []time.Duration
	fresh       *node // a daemon with nothing deployed, for the goroutine baseline
	// incusProxy stands between node a's incus driver and incusd.
	incusProxy *faultproxy.Proxy
	rep        *report.Report
	comps      components
	disk       dataDisk // node a's data disk (disk.full, disk.eio)

	lastProgress time.Time
}

// Run runs a campaign and returns its report. The error is non-nil only
// when the campaign could not start (ErrSetup) or ctx ended; violations
// are in the report (Report.OK).
func Run(ctx context.Context, opts Options) (*report.Report, error) {
	c, err := newCampaign(opts)
	if err != nil {
		return nil, err
	}
	defer c.teardown()
	c.rep.Started = c.clk.Now()
	err = c.campaign(ctx)
	c.rep.Duration = report.Millis(c.clk.Since(c.rep.Started))
	c.rep.Summarize()
	c.printSummary()
	if opts.ReportDir != "" {
		if werr := c.rep.Write(opts.ReportDir); werr != nil && err == nil {
			err = werr
		}
		fmt.Fprintf(c.out, "report: %s\n", filepath.Join(opts.ReportDir, "report.md"))
	}
	return c.rep, err
}

func newCampaign(opts Options) (*campaign, error) {
	sc, err := LookupScenario(opts.Scenario)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	if opts.Plant != nil {
		sc.Plant = *opts.Plant
	}
	if sc, err = sc.only(opts.Kinds); err != nil {
		return nil, fmt.Errorf("%w: --kinds: %v", ErrSetup, err)
	}
	if opts.Clock == nil {
		opts.Clock = clock.New()
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if opts.Faults < 0 {
		return nil, fmt.Errorf("%w: --faults %d", ErrSetup, opts.Faults)
	}
	bin, err := filepath.Abs(opts.Bin)
	if err == nil {
		_, err = os.Stat(bin)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the engenho binary %q: %v", ErrSetup, opts.Bin, err)
	}
	opts.Bin = bin
	var id [4]byte
	_, _ = rand.Read(id[:])
	c := &campaign{opts: opts, sc: sc, clk: opts.Clock, out: opts.Out, run: hex.EncodeToString(id[:])}
	c.rep = &report.Report{Scenario: sc.Name, Seed: opts.Seed, Planned: opts.Faults, Plant: string(sc.Plant), Run: c.run}
	return c, nil
}

func (c *campaign) printf(format string, args ...any) { fmt.Fprintf(c.out, format, args...) }

// campaign is the run proper: set up, every fault, the final checks.
func (c *campaign) campaign(ctx context.Context) error {
	if err := c.setup(ctx); err != nil {
		c.rep.Aborted = err.Error()
		return err
	}
	faults, err := schedule.Build(c.plan())
	if err != nil {
		c.rep.Aborted = err.Error()
		return fmt.Errorf("%w: %v", ErrSetup, err)
	}
	c.rep.Fingerprint = schedule.Fingerprint(faults)
	c.rep.Drawn = c.comps.drawn()
	c.rep.Kinds = c.plan().Kinds()
	for _, f := range faults {
		c.rep.Schedule = append(c.rep.Schedule, strings.TrimSpace(f.String()))
	}
	c.printf("chaos: scenario %s, seed %d, %d faults, schedule %s\n", c.sc.Name, c.opts.Seed, len(faults), c.rep.Fingerprint)
	kinds := ""
	if len(c.opts.Kinds) > 0 {
		kinds = " --kinds " + strings.Join(c.opts.Kinds, ",")
	}
	c.printf("chaos: replay with: engenho chaos run --scenario %s --seed %d --faults %d%s\n", c.sc.Name, c.opts.Seed, c.opts.Faults, kinds)
	c.printf("chaos: kinds %v\nchaos: schedule:\n%s", c.rep.Kinds, schedule.Format(faults))
	for _, f := range faults {
		if err := ctx.Err(); err != nil {
			c.rep.Aborted = "interrupted: " + err.Error()
			return err
		}
		res := c.runFault(ctx, f)
		c.rep.Results = append(c.rep.Results, res)
		c.printResult(res)
		if c.sc.StopAtFirst && len(res.Violation) > 0 {
			c.rep.Aborted = fmt.Sprintf("stopped at the first violation (fault %d), as scenario %s asks", f.Seq, c.sc.Name)
			c.printf("chaos: %s\n", c.rep.Aborted)
			return nil
		}
		if res.Injected && !res.Recovered || !res.Injected && len(res.Violation) > 0 {
			if err := c.heal(ctx); err != nil {
				if ctx.Err() != nil {
					c.rep.Aborted = fmt.Sprintf("interrupted while healing after fault %d", f.Seq)
					return ctx.Err()
				}
				c.rep.Aborted = fmt.Sprintf("after fault %d the nodes did not recover: %v", f.Seq, err)
				c.printf("chaos: ABORTED: %s\n", c.rep.Aborted)
				return nil
			}
		}
	}
	c.finalChecks(ctx)
	return nil
}

// plan is the schedule's input.
func (c *campaign) plan() schedule.Plan {
	return planFor(c.sc, c.opts.Seed, c.opts.Faults, c.comps)
}

// planFor is the schedule's input: the scenario, the seed, the fault
// count and what the machine has; nothing else (CHS-4).
func planFor(sc Scenario, seed uint64, faults int, comps components) schedule.Plan {
	return schedule.Plan{Seed: seed, Faults: faults, Mix: sc.Mix, IntentEvery: sc.IntentEvery,
		Available: map[schedule.Need]bool{schedule.NeedIncus: comps.incus, schedule.NeedHosts: comps.hosts, schedule.NeedCgroups: comps.cgroups,
			schedule.NeedDisk: comps.disk, schedule.NeedFaultFS: comps.fuse, schedule.NeedS3Restart: comps.s3Restart && comps.s3Hosts},
		Targets: append(stackSet{incus: comps.incus, cgroups: comps.cgroups}.targets(), comps.hostTargets()...)}
}

// setup checks the machine, starts the node and deploys the stacks.
func (c *campaign) setup(ctx context.Context) error {
	c.comps = detect(ctx)
	if err := c.comps.require(c.opts.Require); err != nil {
		c.rep.Components = c.comps.list()
		return fmt.Errorf("%w: %v", ErrSetup, err)
	}
	work, err := os.MkdirTemp(c.opts.WorkDir, "engenho-chaos-")
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSetup, err)
	}
	c.work = work
	c.printf("chaos: work directory %s (run %s)\n", work, c.run)
	ports, err := freePorts(2)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrSetup, err)
	}
	c.stacks = stackSet{run: c.run, webPort: ports[0], boxPort: ports[1], incus: c.comps.incus, cgroups: c.comps.cgroups, gen: 1, webReps: 3,
		hbDir: filepath.Join(work, "heartbeats")}
	if err := os.Mkdir(c.stacks.hbDir, 0o755); err != nil {
		return fmt.Errorf("%w: %v", ErrSetup, err)
	}
	c.want = c.stacks.want()
	if c.comps.incus {
		if err := c.startIncusProxy(); err != nil {
			return err
		}
	}
	if c.a, err = c.newNode("a", c.sc.Plant); err != nil {
		return err
	}
	c.disk = mountDataDisk(c.a.dataDir())
	c.comps.disk, c.comps.diskNote = c.disk.ok, c.disk.note
	c.comps.fuse, c.comps.fuseNote = c.disk.fault != nil, c.disk.faultNote
	if !c.disk.ok {
		c.comps.fuseNote = c.disk.note
	}
	if err := c.comps.requireDisk(c.opts.Require); err != nil {
		return fmt.Errorf("%w: %v", ErrSetup, err)
	}
	if err := c.a.start(ctx); err != nil {
		return fmt.Errorf("%w: %v", ErrSetup, err)
	}
	if st, err := c.a.status(ctx); err == nil {
		c.rep.Version = st.Daemon.Version
	}
	if err := c.applyAll(ctx); err != nil {
		return fmt.Errorf("%w: deploying the stacks: %v", ErrSetup, err)
	}
	if c.sc.NoHosts {
		c.comps.hostsNote = "scenario " + c.sc.Name + " runs no hosts"
	} else if err := c.startPairs(ctx); err != nil {
		c.comps.hostsNote = err.Error()
		c.printf("chaos: no hibernating hosts: %v\n", err)
	}
	c.comps.hosts, c.comps.s3Hosts = c.pairOf(svcParkFS) != nil, c.pairOf(svcParkS3) != nil
	if err := c.comps.requireHosts(c.opts.Require, c.sc.NoHosts); err != nil {
		return fmt.Errorf("%w: %v", ErrSetup, err)
	}
	c.rep.Components = c.comps.list()
	for _, comp := range c.rep.Components {
		c.printf("chaos: component %-7s available=%-5t %s\n", comp.Name, comp.Available, comp.Note)
	}
	if c.sc.Plant != inject.PlantNone {
		c.printf("chaos: planted bug %q (self-test)\n", c.sc.Plant)
	}
	ok, _, vs, _ := c.await(ctx, c.a, c.clk.Now(), awaitSpec{bound: 3 * time.Minute})
	if !ok {
		return fmt.Errorf("%w: the stacks did not converge: %v", ErrSetup, vs)
	}
	return nil
}

// applyAll applies every stack file and records the revisions it acknowledged.
func (c *campaign) applyAll(ctx context.Context) error {
	var files []control.ApplyFile
	for _, f := range c.stacks.files() {
		files = append(files, control.ApplyFile{Name: f[0], Content: f[1]})
	}
	_, err := c.apply(ctx, c.a, files)
	return err
}

// apply deploys files and records each service's acknowledged revision.
func (c *campaign) apply(ctx context.Context, n *node, files []control.ApplyFile) ([]invariant.Ack, error) {
	var res control.ApplyResult
	err := n.call(ctx, func(ctx context.Context, cl *control.Client) error {
		var err error
		res, err = cl.Apply(ctx, control.ApplyArgs{Files: files}, nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	var acks []invariant.Ack
	for _, plan := range res.Stacks {
		for _, ch := range plan.Changes {
			name := plan.Stack + "/" + ch.Service
			c.setWant(name, func(sw *invariant.ServiceWant) { sw.Revision = ch.ToRevision })
			acks = append(acks, invariant.Ack{Service: name, What: "revision", Value: ch.ToRevision, At: c.clk.Now()})
		}
	}
	return acks, nil
}

func (c *campaign) setWant(service string, edit func(*invariant.ServiceWant)) {
	for i := range c.want.Services {
		if c.want.Services[i].Service == service {
			edit(&c.want.Services[i])
		}
	}
}

func (c *campaign) newNode(name string, plant inject.Plant) (*node, error) {
	dir := filepath.Join(c.work, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	var extra []string
	if plant != inject.PlantNone {
		extra = append(extra, inject.PlantEnv+"="+string(plant))
	}
	n := &node{name: name, bin: c.opts.Bin, dir: dir, env: daemonEnv(extra...), config: c.config(name)}
	if err := n.writeConfig(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSetup, err)
	}
	return n, nil
}

// config is node a's daemon config: the process driver, incus when
// present, no edge.
func (c *campaign) config(name string) []byte {
	return c.nodeConfig(name, `{"kind": "fs", "prefix": "chaos"}`, "", c.comps.incus)
}

// nodeConfig is a daemon config. It is written as one JSON object (JSON
// is YAML): any strict prefix of it, a half-written file, fails to parse,
// so config.half-written always writes a broken file.
func (c *campaign) nodeConfig(name, objstore, edge string, incus bool) []byte {
	drv := ""
	if incus {
		drv = `, "incus": {"enabled": true}`
		if c.incusProxy != nil && name == "a" {
			drv = fmt.Sprintf(`, "incus": {"enabled": true, "socket": %q}`, c.incusProxy.Addr())
		}
	}
	edgeKey := ""
	if edge != "" {
		edgeKey = fmt.Sprintf(`  "edge": {"listen": %q},
`, edge)
	}
	// Each node draws its instances' host ports from a block of its own
	// (21000 up, 200 each): nodes that run side by side would otherwise
	// all start at the default range's first port and race for it.
	low := 21000 + 200*c.portBlocks
	c.portBlocks++
	return fmt.Appendf(nil, `{
  "node": {"name": "chaos-%s"},
  "ports": {"instance_range": "%d-%d"},
  "data_dir": "data",
  "log": {"level": "info"},
  "drivers": {"process": {"enabled": true}%s},
  "objstore": %s,
%s  "supervision": {"ladder": {"immediate": 3, "delays": ["100ms", "200ms", "400ms"], "cap": "1s", "stable": "5s"}},
  "sweep": {"interval": "500ms"},
  "drain": {"budget": "30s"},
  "boot": {"step_timeout": "10s"},
  "chaos": {"enabled": true}
}
`, name, low, low+199, drv, objstore, edgeKey)
}

// heal brings every node back after a fault one did not recover from,
// so the campaign can go on: on node a and on each host pair's nodes,
// disarm every rule, restore the config and relaunch a dead daemon; then
// wait once more for node a to converge and for each pair's host to
// serve.
func (c *campaign) heal(ctx context.Context) error {
	c.printf("chaos: healing the nodes before the next fault\n")
	for _, n := range c.allNodes() {
		if n == c.fresh {
			continue
		}
		_ = n.writeConfig()
		if !n.alive() {
			if err := n.launch(); err != nil {
				return fmt.Errorf("relaunching node %s: %w", n.name, err)
			}
		}
	}
	c.healJournal(ctx)
	for _, p := range c.pairs {
		for _, px := range p.proxies {
			px.Clear()
		}
	}
	if c.incusProxy != nil {
		c.incusProxy.Clear()
	}
	for _, n := range c.allNodes() {
		if n != c.fresh {
			_, _ = n.chaos(ctx, control.ChaosArgs{Kind: "clear"})
		}
	}
	ok, _, vs, _ := c.await(ctx, c.a, c.clk.Now(), awaitSpec{bound: time.Minute})
	if err := ctx.Err(); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("node a still violates: %v", vs)
	}
	for _, p := range c.pairs {
		if ok, _, vs := c.awaitHost(ctx, p, 0, c.clk.Now(), time.Minute); !ok {
			if err := ctx.Err(); err != nil {
				return err
			}
			return fmt.Errorf("host pair %s still violates: %v", p.service(), vs)
		}
	}
	return nil
}

func (c *campaign) printResult(res report.Result) {
	outcome := fmt.Sprintf("recovered in %s", res.Recovery)
	switch {
	case !res.Injected:
		outcome = "skipped: " + res.Skipped
	case !res.Recovered:
		outcome = fmt.Sprintf("NOT RECOVERED within %s", res.Bound)
	}
	target := res.Target
	if res.Detail != "" {
		target += " (" + res.Detail + ")"
	}
	c.printf("[%4d/%d] %-20s %s: %s\n", res.Seq, c.opts.Faults, res.Kind, target, outcome)
	for _, v := range res.Violation {
		c.printf("VIOLATION seed=%d fault=%d (%s) invariant=%s %s: %s\n", c.opts.Seed, res.Seq, res.Fault, v.Invariant, v.Subject, v.Evidence)
	}
}

func (c *campaign) printSummary() {
	injected, recovered, skipped := c.rep.Totals()
	verdict := "PASSED"
	if !c.rep.OK() {
		verdict = "FAILED"
	}
	c.printf("chaos: %s: scenario %s seed %d: %d injected, %d recovered, %d skipped, %d violations in %s\n",
		verdict, c.sc.Name, c.opts.Seed, injected, recovered, skipped, len(c.rep.Violations()), c.rep.Duration)
	for _, s := range c.rep.Summary {
		c.printf("  %-20s injected %3d recovered %3d p50 %-8s p99 %-8s max %-8s violations %d  (wall %s)\n",
			s.Kind, s.Injected, s.Recovered, s.P50, s.P99, s.Max, s.Violations, s.Took)
	}
	c.printLossWindows()
	for _, v := range c.rep.Final {
		c.printf("VIOLATION seed=%d final checks invariant=%s %s: %s\n", c.opts.Seed, v.Invariant, v.Subject, v.Evidence)
	}
}

// teardown stops what the campaign started and removes its directory
// unless asked to keep it or something was violated.
func (c *campaign) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, n := range c.allNodes() {
		if n == nil || !n.alive() {
			continue
		}
		_ = n.writeConfig()
		c.removeStacks(ctx, n)
		_ = n.exit(ctx, 40*time.Second)
	}
	for _, p := range c.pairs {
		if p.closeFn != nil {
			_ = p.closeFn()
		}
		for _, px := range p.proxies {
			_ = px.Close()
		}
	}
	if c.incusProxy != nil {
		_ = c.incusProxy.Close()
	}
	if c.run != "" {
		for _, p := range markedProcs(c.run) {
			_ = killGroup(p.Pgid)
		}
	}
	if c.comps.incus {
		if n, err := deleteIncusStack(ctx, c.stacks.incusStack()); err != nil || n > 0 {
			c.printf("chaos: teardown deleted %d leftover incus instances of stack %s (%v)\n", n, c.stacks.incusStack(), err)
		}
	}
	if c.work == "" {
		return
	}
	if c.a != nil {
		_ = thaw(filepath.Join(c.a.dataDir(), "journal")) // a journal fault may have left it immutable
		if c.comps.disk {
			unmountDataDisk(c.a.dataDir(), c.disk)
		}
	}
	if c.opts.Keep || !c.rep.OK() {
		c.printf("chaos: kept %s (daemon logs: */daemon.log)\n", c.work)
		return
	}
	_ = os.RemoveAll(c.work)
}

// allNodes lists every node the campaign started.
func (c *campaign) allNodes() []*node {
	out := []*node{c.a, c.fresh}
	for _, p := range c.pairs {
		out = append(out, p.nodes...)
	}
	return out
}

// removeStacks removes every deployed stack and waits (bounded) for the
// services to be gone.
func (c *campaign) removeStacks(ctx context.Context, n *node) {
	st, err := n.status(ctx)
	if err != nil {
		return
	}
	for _, s := range st.Stacks {
		_ = n.call(ctx, func(ctx context.Context, cl *control.Client) error {
			_, err := cl.Remove(ctx, control.RemoveArgs{Stack: s.Stack})
			return err
		})
	}
	deadline := c.clk.Now().Add(30 * time.Second)
	for c.clk.Now().Before(deadline) {
		if st, err := n.status(ctx); err == nil && len(st.Services) == 0 {
			return
		}
		if sleep(ctx, poll) != nil {
			return
		}
	}
}

// freePorts finds n free loopback TCP ports.
func freePorts(n int) ([]int, error) {
	var out []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	sort.Ints(out)
	return out, nil
}
