package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/engenho/engenho/chaos/inject"
	"github.com/engenho/engenho/chaos/invariant"
	"github.com/engenho/engenho/chaos/report"
	"github.com/engenho/engenho/chaos/schedule"
	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/runtime/control"
)

// injected is what one injection did.
type injected struct {
	target  string
	detail  string
	touched []string // services whose every slot the fault may change; "svc/slot" for one slot
	witness func(observation) bool
	// mayBeInvisible: the fault may take no visible effect (see awaitSpec).
	mayBeInvisible bool
	acks           []invariant.Ack
	cleanup        func(ctx context.Context) string // disarm; returns a note
	// violations seen while injecting (a host's visit count).
	violations []invariant.Violation
}

func (in *injected) touch(service string, slot int) {
	if slot > 0 {
		in.touched = append(in.touched, fmt.Sprintf("%s/%d", service, slot))
		return
	}
	in.touched = append(in.touched, service)
}

func (in *injected) isTouched(service string, slot int) bool {
	for _, t := range in.touched {
		if t == service || t == fmt.Sprintf("%s/%d", service, slot) {
			return true
		}
	}
	return false
}

// errSkip marks a fault with nothing live to aim at.
type errSkip struct{ reason string }

func (e errSkip) Error() string { return e.reason }

// runFault runs one scheduled fault: the intents before it, the fault,
// the wait for recovery, the checks.
func (c *campaign) runFault(ctx context.Context, f schedule.Fault) report.Result {
	began := c.clk.Now()
	res := c.runFaultOnce(ctx, f)
	res.Took = report.Millis(c.clk.Since(began))
	return res
}

func (c *campaign) runFaultOnce(ctx context.Context, f schedule.Fault) report.Result {
	res := report.Result{Seq: f.Seq, Kind: f.Kind, Fault: strings.TrimSpace(f.String()), Bound: report.Millis(c.sc.boundOf(f.Kind))}
	before, err := c.observe(ctx, c.a, false)
	if err != nil {
		res.Skipped = "the daemon did not answer before the fault: " + err.Error()
		return res
	}
	inj := &injected{}
	var notes []string
	f = c.resolve(f)
	if f.Kind.OnHostPair() {
		return c.runHostFault(ctx, f, res)
	}
	for _, in := range f.Intents {
		ack, err := c.intent(ctx, c.a, in)
		if err != nil {
			notes = append(notes, fmt.Sprintf("intent %s failed: %v", in, err))
			continue
		}
		inj.acks = append(inj.acks, ack)
		inj.touch(in.Service, 0)
	}
	// Targets are picked from a look after the intents: a stop may still
	// be stopping what it stops, and a fault meets it mid-change.
	target := before
	if len(f.Intents) > 0 {
		if obs, err := c.observe(ctx, c.a, false); err == nil {
			target = obs
		}
	}
	err = c.inject(ctx, f, target, inj)
	// Recovery is counted from the end of the fault (a flood, a rollout
	// reaching its slot), not from its start.
	start := c.clk.Now()
	if err != nil {
		if skip, ok := err.(errSkip); ok {
			res.Skipped = skip.reason
		} else {
			res.Skipped = "injection failed: " + err.Error()
		}
	} else {
		res.Injected = true
	}
	res.Target, res.Detail = inj.target, inj.detail
	spec := awaitSpec{bound: c.sc.boundOf(f.Kind), witness: inj.witness, mayBeInvisible: inj.mayBeInvisible, acks: inj.acks,
		before: &before, touched: inj.isTouched}
	if !res.Injected {
		spec.witness = nil
	}
	ok, at, vs, note := c.await(ctx, c.a, start, spec)
	if inj.cleanup != nil {
		if n := inj.cleanup(ctx); n != "" {
			notes = append(notes, n)
		}
	}
	if note != "" {
		notes = append(notes, note)
	}
	if res.Injected {
		res.Recovered = ok
		if ok {
			res.Recovery = report.Millis(at.Sub(start))
		}
	}
	res.Violation = dedupe(append(inj.violations, vs...))
	if len(notes) > 0 {
		res.Detail = strings.TrimSpace(res.Detail + "; " + strings.Join(notes, "; "))
		res.Detail = strings.TrimPrefix(res.Detail, "; ")
	}
	return res
}

func dedupe(vs []invariant.Violation) []invariant.Violation {
	seen := map[string]bool{}
	var out []invariant.Violation
	for _, v := range vs {
		if !seen[v.String()] {
			seen[v.String()] = true
			out = append(out, v)
		}
	}
	return out
}

// resolve maps the fault's names to the deployed ones, and moves a fault
// aimed at the instances of a stopped service to the next service of the
// same driver that runs (deterministic: the same state gives the same
// choice), so stop intents do not starve the kill faults.
func (c *campaign) resolve(f schedule.Fault) schedule.Fault {
	f.Service = c.stacks.real(f.Service)
	intents := make([]schedule.Intent, len(f.Intents))
	for i, in := range f.Intents {
		in.Service = c.stacks.real(in.Service)
		intents[i] = in
	}
	f.Intents = intents
	return f
}

// running picks the service a kill fault aims at: the scheduled one, or
// when its stop intent holds, the next service of the same driver that
// is not stopped.
func (c *campaign) running(service string) (string, bool) {
	targets := c.stacks.targets()
	start := -1
	for i, t := range targets {
		if c.stacks.real(t.Service) == service {
			start = i
		}
	}
	if start < 0 {
		return service, true
	}
	for k := range targets {
		t := targets[(start+k)%len(targets)]
		sw, ok := c.want.Service(c.stacks.real(t.Service))
		if t.Driver == targets[start].Driver && ok && !sw.Stopped {
			return sw.Service, true
		}
	}
	return service, false
}

// intent makes one operator request and records what was acknowledged.
func (c *campaign) intent(ctx context.Context, n *node, in schedule.Intent) (invariant.Ack, error) {
	stack, service, _ := strings.Cut(in.Service, "/")
	ack := invariant.Ack{Service: in.Service}
	err := n.call(ctx, func(ctx context.Context, cl *control.Client) error {
		var err error
		switch in.Op {
		case "scale":
			_, err = cl.Scale(ctx, control.ScaleArgs{Stack: stack, Service: service, Replicas: in.Replicas})
		case "stop":
			_, err = cl.ServiceStop(ctx, control.ServiceRef{Stack: stack, Service: service})
		case "start":
			_, err = cl.ServiceStart(ctx, control.ServiceRef{Stack: stack, Service: service})
		default:
			err = fmt.Errorf("unknown intent %q", in.Op)
		}
		return err
	})
	if err != nil {
		return ack, err
	}
	ack.At = c.clk.Now()
	switch in.Op {
	case "scale":
		ack.What, ack.Value = "replicas", strconv.Itoa(in.Replicas)
		c.setWant(in.Service, func(sw *invariant.ServiceWant) { sw.Replicas = in.Replicas })
	case "stop":
		ack.What, ack.Value = "stopped", "true"
		c.setWant(in.Service, func(sw *invariant.ServiceWant) {
			if !sw.Stopped {
				sw.Stopped, sw.StoppedAt = true, ack.At
			}
		})
	case "start":
		ack.What, ack.Value = "stopped", "false"
		c.setWant(in.Service, func(sw *invariant.ServiceWant) { sw.Stopped, sw.StoppedAt = false, time.Time{} })
	}
	return ack, nil
}

// inject performs fault f.
func (c *campaign) inject(ctx context.Context, f schedule.Fault, before observation, inj *injected) error {
	switch f.Kind {
	case schedule.PanicRoot, schedule.PanicStack, schedule.PanicService, schedule.PanicReplica, schedule.PanicHost, schedule.PanicSidecar:
		return c.injectPanic(ctx, f, before, inj)
	case schedule.WorkloadKill:
		return c.killInstance(f, before, "process", inj)
	case schedule.IncusKillInit:
		return c.killInstance(f, before, "incus", inj)
	case schedule.DriverFail, schedule.DriverTimeout, schedule.DriverHang:
		return c.injectDriver(ctx, f, before, inj)
	case schedule.DaemonKill:
		return c.injectDaemonKill(ctx, f, inj)
	case schedule.DaemonKillRollout:
		return c.injectRolloutKill(ctx, f, inj)
	case schedule.ConfigTruncate, schedule.ConfigHalf:
		return c.injectConfig(ctx, f, inj)
	case schedule.SocketGarbage:
		return c.injectGarbage(ctx, f, inj)
	case schedule.SocketFlood:
		return c.injectFlood(ctx, f, inj)
	case schedule.JournalCorrupt, schedule.JournalReadonly:
		return c.injectJournal(ctx, f, inj)
	case schedule.WorkloadStop:
		return c.injectWorkloadStop(ctx, f, before, inj)
	case schedule.WorkloadOOM:
		return c.injectOOM(ctx, f, before, inj)
	case schedule.DaemonStop:
		return c.injectDaemonStop(ctx, f, inj)
	case schedule.DaemonFDLimit:
		return c.injectFDLimit(ctx, f, inj)
	case schedule.Compound:
		return c.injectCompound(ctx, f, before, inj)
	case schedule.DiskFull:
		return c.injectDiskFull(ctx, f, inj)
	case schedule.DiskEIO:
		return c.injectDiskEIO(ctx, f, inj)
	case schedule.DiskTornState:
		return c.injectTornState(ctx, f, before, inj)
	case schedule.ClockJump:
		return c.injectClockJump(ctx, f, before, inj)
	case schedule.IncusAPIError, schedule.IncusAPISlow:
		return c.injectIncusAPI(ctx, f, before, inj)
	case schedule.IncusRestart:
		return c.injectIncusRestart(ctx, f, before, inj)
	}
	return errSkip{fmt.Sprintf("%s needs hibernating hosts, which this daemon does not run", f.Kind)}
}

// actorClass is the last path segment's prefix of each panic kind.
var actorClass = map[schedule.Kind]string{
	schedule.PanicStack: "stack:", schedule.PanicService: "service:", schedule.PanicReplica: "replica:",
	schedule.PanicHost: "host:", schedule.PanicSidecar: "sidecar:",
}

// panicCandidates lists the actor paths a panic fault may hit.
func panicCandidates(f schedule.Fault, before observation) []string {
	var out []string
	for _, n := range before.tree {
		segs := strings.Split(n.Path, "/")
		last := segs[len(segs)-1]
		switch f.Kind {
		case schedule.PanicRoot:
			if n.Path == "root" {
				out = append(out, n.Path)
			}
		case schedule.PanicActivator:
			if n.Path == "root/activator" {
				out = append(out, n.Path)
			}
		case schedule.PanicStack:
			if n.Path == "root/stack:"+f.Service {
				out = append(out, n.Path)
			}
		case schedule.PanicService, schedule.PanicReplica:
			stack, svc, _ := strings.Cut(f.Service, "/")
			base := "root/stack:" + stack + "/service:" + svc
			if f.Kind == schedule.PanicService && n.Path == base ||
				f.Kind == schedule.PanicReplica && strings.HasPrefix(n.Path, base+"/replica:") && len(segs) == 4 {
				out = append(out, n.Path)
			}
		default:
			if strings.HasPrefix(last, actorClass[f.Kind]) {
				out = append(out, n.Path)
			}
		}
	}
	sort.Strings(out)
	return out
}

func (c *campaign) injectPanic(ctx context.Context, f schedule.Fault, before observation, inj *injected) error {
	cands := panicCandidates(f, before)
	if len(cands) == 0 {
		return errSkip{"no live actor of the class"}
	}
	return c.panicAt(ctx, cands[int(f.Pick)%len(cands)], before, inj)
}

// panicAt panics the actor at path on node a and sets the witness: the
// actor restarted (or gone: its parent retired it meanwhile), or, for the
// root, a new runtime epoch.
func (c *campaign) panicAt(ctx context.Context, path string, before observation, inj *injected) error {
	prev, _ := before.treeNode(path)
	epoch := before.status.Daemon.Lifecycle.Epoch
	if inj.target == "" {
		inj.target = path
	}
	if _, err := c.a.chaos(ctx, control.ChaosArgs{Kind: "panic", Target: path}); err != nil {
		return err
	}
	if path == "root" {
		// The root gave up: the daemon boots its runtime again (SUP-8).
		inj.witness = func(o observation) bool { return o.status.Daemon.Lifecycle.Epoch > epoch }
		return nil
	}
	inj.witness = func(o observation) bool {
		now, ok := o.treeNode(path)
		return !ok || now.Gen != prev.Gen || now.Restarts > prev.Restarts || o.status.Daemon.Lifecycle.Epoch > epoch
	}
	return nil
}

// pickVictim picks the running instance fault f aims at: of its service,
// or when that one is stopped the next running service of the same driver
// (see running), by f.Pick among its running instances; the instance's
// slot becomes the fault's target and is marked touched.
func (c *campaign) pickVictim(f schedule.Fault, before observation, driver string, inj *injected) (inject.Instance, error) {
	service, ok := c.running(f.Service)
	if !ok {
		return inject.Instance{}, errSkip{"every " + driver + " service is stopped"}
	}
	cands := instanceCandidates(before, service, driver)
	if len(cands) == 0 {
		return inject.Instance{}, errSkip{"no running instance of " + service}
	}
	victim := cands[int(f.Pick)%len(cands)]
	slot, _ := strconv.Atoi(victim.Labels[drivers.LabelSlot])
	inj.target = fmt.Sprintf("%s/%d", service, slot)
	inj.touch(service, slot)
	return victim, nil
}

// instanceCandidates lists the running instances of service on driver,
// by slot and name.
func instanceCandidates(before observation, service, driver string) []inject.Instance {
	var out []inject.Instance
	for _, in := range before.instances {
		svc := in.Labels[drivers.LabelStack] + "/" + in.Labels[drivers.LabelService]
		if in.Driver == driver && svc == service && in.State == drivers.StateRunning && in.Pid > 0 {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Labels[drivers.LabelSlot] != out[j].Labels[drivers.LabelSlot] {
			return out[i].Labels[drivers.LabelSlot] < out[j].Labels[drivers.LabelSlot]
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// killInstance sends SIGKILL to a running instance's process from
// outside the daemon: a workload process (process driver) or an incus
// container's init, whose host pid the driver reports.
func (c *campaign) killInstance(f schedule.Fault, before observation, driver string, inj *injected) error {
	victim, err := c.pickVictim(f, before, driver, inj)
	if err != nil {
		return err
	}
	inj.detail = fmt.Sprintf("%s pid %d", victim.Name, victim.Pid)
	if err := syscall.Kill(victim.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("SIGKILL %d: %w", victim.Pid, err)
	}
	// Seen once the status, not only the driver, shows the new run.
	inj.witness = func(o observation) bool {
		r, ok := o.replica(victim.Name)
		return !ok || !r.StartedAt.Equal(victim.StartedAt)
	}
	return nil
}

// injectDriver arms a driver rule on one service's instances, then makes
// the daemon meet it: start and inspect by killing a replica (its
// recovery starts and inspects), create, stop and delete by a redeploy
// (every instance replaced), exec by the probes of shop/cache (the one
// exec probe), list by a restart of the service actor (its adoption).
func (c *campaign) injectDriver(ctx context.Context, f schedule.Fault, before observation, inj *injected) error {
	op := f.Params["op"]
	if op == "exec" {
		f.Service = svcCache
	}
	service, ok := c.running(f.Service)
	if !ok {
		return errSkip{"every service of its driver is stopped"}
	}
	f.Service = service
	drv := c.driverOf(service)
	stack, svc, _ := strings.Cut(f.Service, "/")
	params := map[string]string{"driver": drv, "op": op, "match": stack + "-" + svc + "-", "count": f.Params["count"]}
	switch f.Kind {
	case schedule.DriverFail:
		params["mode"], params["kind"] = "fail", f.Params["kind"]
		if params["kind"] == "" {
			params["kind"] = "transient"
		}
	case schedule.DriverTimeout:
		params["mode"], params["delay"] = "timeout", f.Params["delay_ms"]+"ms"
	case schedule.DriverHang:
		params["mode"] = "hang"
	}
	if len(instanceCandidates(before, f.Service, drv)) == 0 {
		return errSkip{"no running instance of " + f.Service}
	}
	if op == "list" {
		// A list names no instance: the rule matches any list call, and
		// only a restarting service actor lists on node a.
		params["match"] = ""
	}
	if _, err := c.a.chaos(ctx, control.ChaosArgs{Kind: "driver", Params: params}); err != nil {
		return err
	}
	inj.cleanup = c.clearRules
	rule := fmt.Sprintf("%s %s %s ×%s", params["mode"], params["kind"], op, params["count"])
	switch op {
	case "create", "stop", "delete":
		inj.detail = "redeployed, then " + rule
		return c.redeployInto(ctx, f.Service, before, inj)
	case "exec":
		// A probe that cannot run is neither healthy nor unhealthy and
		// changes nothing (SUP-14): nothing may restart, so no witness.
		inj.target, inj.detail = f.Service, rule+" (the probes meet it)"
		return sleep(ctx, 3*time.Second)
	case "list":
		inj.target, inj.detail = "root/stack:"+stack+"/service:"+svc, rule+" (a restarted service actor's adoption meets it)"
		return c.panicAt(ctx, inj.target, before, inj)
	}
	if err := c.killInstance(f, before, drv, inj); err != nil {
		return err
	}
	inj.detail += ", then " + rule
	return nil
}

// driverOf is the driver the campaign runs service on.
func (c *campaign) driverOf(service string) string {
	for _, t := range c.stacks.targets() {
		if c.stacks.real(t.Service) == service {
			return t.Driver
		}
	}
	return "process"
}

// redeployInto redeploys service (every instance replaced, SVC-17) and
// waits to see each slot on a new instance.
func (c *campaign) redeployInto(ctx context.Context, service string, before observation, inj *injected) error {
	stack, svc, _ := strings.Cut(service, "/")
	var res control.ChangeResult
	err := c.a.call(ctx, func(ctx context.Context, cl *control.Client) error {
		var err error
		res, err = cl.Redeploy(ctx, control.ServiceRef{Stack: stack, Service: svc})
		return err
	})
	if err != nil {
		return err
	}
	for _, ch := range res.Changes {
		name := res.Stack + "/" + ch.Service
		c.setWant(name, func(sw *invariant.ServiceWant) { sw.Revision = ch.ToRevision })
		inj.acks = append(inj.acks, invariant.Ack{Service: name, What: "revision", Value: ch.ToRevision, At: c.clk.Now()})
	}
	inj.target = service
	inj.touch(service, 0)
	old := map[string]bool{}
	for _, in := range instanceCandidates(before, service, c.driverOf(service)) {
		old[in.Name] = true
	}
	inj.witness = func(o observation) bool {
		for _, st := range o.status.Services {
			if st.Stack+"/"+st.Service != service {
				continue
			}
			for _, r := range st.Replicas {
				if old[r.Instance] {
					return false
				}
			}
			return len(st.Replicas) > 0
		}
		return false
	}
	return nil
}

// clearRules disarms every rule and notes how often they were hit.
func (c *campaign) clearRules(ctx context.Context) string {
	res, err := c.a.chaos(ctx, control.ChaosArgs{Kind: "faults"})
	note := ""
	if err == nil {
		var rules []inject.Armed
		if json.Unmarshal([]byte(res.Detail), &rules) == nil {
			var parts []string
			for _, r := range rules {
				parts = append(parts, fmt.Sprintf("%s %s hit %d", r.Rule.Mode, r.Rule.Op, r.Hits))
			}
			note = "rules: " + strings.Join(parts, ", ")
		}
	}
	if _, err := c.a.chaos(ctx, control.ChaosArgs{Kind: "clear"}); err != nil {
		note += "; clearing the rules failed: " + err.Error()
	}
	return note
}

// injectDaemonKill: the intents before it were acknowledged; SIGKILL the
// daemon and start it again. Every acknowledged intent must be in the
// journal after it (REL-3) and no healthy replica restarted (DMN-9).
func (c *campaign) injectDaemonKill(ctx context.Context, f schedule.Fault, inj *injected) error {
	if err := sleep(ctx, time.Duration(f.Param("delay_ms"))*time.Millisecond); err != nil {
		return err
	}
	inj.target = "daemon of node " + c.a.name
	return killAndRelaunch(c.a, inj)
}

// killAndRelaunch sends SIGKILL to n's daemon and starts it again at once.
func killAndRelaunch(n *node, inj *injected) error {
	old, err := n.relaunch(inj, nil, nil)
	if err != nil {
		return err
	}
	inj.detail = strings.TrimPrefix(inj.detail+fmt.Sprintf("; pid %d killed", old), "; ")
	return nil
}

// injectRolloutKill deploys a new revision of the rollout service and
// kills the daemon once the rollout has replaced after_slots slots.
func (c *campaign) injectRolloutKill(ctx context.Context, f schedule.Fault, inj *injected) error {
	sw, ok := c.want.Service(f.Service)
	if !ok || f.Service != svcWeb {
		return errSkip{"no rollout service " + f.Service}
	}
	c.stacks.gen++
	c.stacks.webReps = sw.Replicas
	acks, err := c.apply(ctx, c.a, []control.ApplyFile{{Name: "shop.yaml", Content: c.stacks.shop()}})
	if err != nil {
		return err
	}
	inj.acks = append(inj.acks, acks...)
	inj.touch(f.Service, 0)
	inj.target = f.Service
	want := f.Param("after_slots")
	deadline := c.clk.Now().Add(30 * time.Second)
	reached := "the deadline passed"
	for c.clk.Now().Before(deadline) {
		st, err := c.a.status(ctx)
		if err == nil {
			if done, rolling := rolloutDone(st, f.Service); !rolling && done < 0 {
				reached = "the rollout had finished"
				break
			} else if rolling && done >= want {
				reached = fmt.Sprintf("%d slots done", done)
				break
			}
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	inj.detail = fmt.Sprintf("generation %d, killed when %s (wanted %d)", c.stacks.gen, reached, want)
	return killAndRelaunch(c.a, inj)
}

// rolloutDone counts a service's rollout slots done; rolling is false
// with done -1 when no rollout runs.
func rolloutDone(st control.StatusResult, service string) (done int, rolling bool) {
	for _, s := range st.Services {
		if s.Stack+"/"+s.Service != service || s.Rollout == nil {
			continue
		}
		for _, sl := range s.Rollout.Slots {
			if sl.State == "done" {
				done++
			}
		}
		return done, true
	}
	return -1, false
}

// injectConfig truncates the config file or writes half of it in place,
// as a crashed editor would; with restart=1 the daemon is also killed and
// started on the broken file (its boot holds, DMN-7) before the file is
// restored (the held boot retries on the change, DMN-16).
func (c *campaign) injectConfig(ctx context.Context, f schedule.Fault, inj *injected) error {
	broken := []byte{}
	inj.target = c.a.configPath()
	if f.Kind == schedule.ConfigHalf {
		broken = c.a.config[:len(c.a.config)/2]
	}
	inj.detail = fmt.Sprintf("%d of %d bytes", len(broken), len(c.a.config))
	if err := os.WriteFile(c.a.configPath(), broken, 0o600); err != nil {
		return err
	}
	// Long enough for the watcher's debounce and a reload attempt.
	if err := sleep(ctx, time.Second); err != nil {
		return err
	}
	if !c.a.alive() {
		_ = c.a.writeConfig()
		return fmt.Errorf("the daemon exited on a broken config file (see %s)", c.a.logPath())
	}
	if f.Param("restart") == 1 {
		if err := killAndRelaunch(c.a, inj); err != nil {
			return err
		}
		state := "no answer"
		deadline := c.clk.Now().Add(20 * time.Second)
		for c.clk.Now().Before(deadline) {
			if st, err := c.a.status(ctx); err == nil {
				state = string(st.Daemon.Lifecycle.Name)
				if state != "booting" && state != "resolving" {
					break
				}
			}
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return err
			}
		}
		inj.detail += ", restarted on it: " + state
	}
	return c.a.writeConfig()
}
