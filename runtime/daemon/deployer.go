package daemon

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/engenho/engenho/configs/stackfile"
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
)

// SourceRemove marks a deployment recorded by `engenho remove`: the stack is
// being removed, and a restarted daemon goes on removing it.
const SourceRemove = "engenho remove"

// ErrStack kinds for desired-state requests.
var (
	ErrUnknownStack   = errors.New("unknown stack")
	ErrUnknownService = errors.New("unknown service")
	ErrRemoving       = errors.New("stack is being removed")
)

// Deployer owns the node's desired state. Every change is recorded in the
// journal (synced) before the tree is told, so an acknowledged request
// survives a SIGKILL (REL-3). Changes to one node are serialized.
type Deployer struct {
	mu      sync.Mutex
	journal *journal.Journal
	node    stackfile.Node
	// key seals secret env values in the journal and binds revisions and
	// declaration digests to the node (SEC-2).
	key  stackfile.NodeKey
	send func(msg any) // to the root; nil while the tree is down
	// observe, when set, is told how long each synced intent write took.
	observe func(time.Duration)
	// announce records an event durably (override.set, override.dropped);
	// nil drops them.
	announce func(messages.Event)
	now      func() time.Time
	// shown is what status shows of the overrides, per stack and service
	// (SVC-23): replaced after each write, read without the lock (DMN-13).
	shown atomic.Pointer[map[string]map[string][]messages.Override]
	// removals wait for a stack to be gone to delete its volumes
	// (volumes.go).
	removals volumeRemovals
	// actors is who asked for each stack's deployment in force, for the
	// events the tree raises (issue 17); nil keeps events as they are.
	actors *actors
	// changed, when set, is called after each recorded change of the
	// desired state (the secret watch arms itself on it).
	changed func()
}

// NewDeployer returns a deployer over j; node validates new definitions;
// key is the node key (runtime/nodekey) that keeps secret env values
// sealed in the journal.
func NewDeployer(j *journal.Journal, node stackfile.Node, key stackfile.NodeKey) *Deployer {
	return &Deployer{journal: j, node: node, key: key, now: time.Now}
}

// OnChange sets what is called after each recorded change of the desired
// state (nil: nothing).
func (d *Deployer) OnChange(fn func()) {
	d.mu.Lock()
	d.changed = fn
	d.mu.Unlock()
}

// noteChange calls the OnChange hook; the caller holds d.mu.
func (d *Deployer) noteChange() {
	if d.changed != nil {
		d.changed()
	}
}

// Attach connects the deployer to a running tree (nil detaches).
func (d *Deployer) Attach(send func(msg any)) {
	d.mu.Lock()
	d.send = send
	d.mu.Unlock()
}

func (d *Deployer) tell(msg any) {
	if d.send != nil {
		d.send(msg)
	}
}

// Desired reads every stack's desired state for the tree's start.
func (d *Deployer) Desired() ([]messages.ApplyStack, []string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	states, err := d.journal.Stacks()
	if err != nil {
		return nil, nil, err
	}
	var out []messages.ApplyStack
	var removing []string
	d.seedActors()
	for _, st := range states {
		m, err := d.applyMessage(st)
		if err != nil {
			return nil, nil, fmt.Errorf("stack %s: %w", st.Stack, err)
		}
		d.publish(st, m)
		out = append(out, m)
		if st.Current.Source == SourceRemove {
			removing = append(removing, st.Stack)
		}
	}
	return out, removing, nil
}

// Applied is what an apply did: the plan of the effective definition
// (SVC-4) and a note per override it kept or dropped (SVC-23).
type Applied struct {
	Changes []stackfile.Change
	Notes   []string
}

// Apply validates st and, unless dryRun, records it as the stack's
// declaration and, when it changes the definition, as its new deployment,
// then hands the effective definition to the tree (SVC-5). The plan is of
// what will run: the file with the overrides it does not contradict
// (SVC-23). A refused stack changes nothing (SVC-2).
//
// by, unless nil or dryRun, is who asked: the request is recorded in the
// deploy audit log whatever its outcome (issue 17).
func (d *Deployer) Apply(ctx context.Context, st *stackfile.Stack, source string, dryRun bool, by *journal.Who) (Applied, error) {
	return d.apply(ctx, st, source, dryRun, by, "")
}

// reloadApply is Apply for a stack file the config lists, by the daemon
// itself: only an apply that records something, or fails, is audited, so
// a reload that changes nothing leaves no entry.
func (d *Deployer) reloadApply(ctx context.Context, st *stackfile.Stack, source string) (Applied, error) {
	by := self()
	return d.apply(ctx, st, source, false, &by, "reload of "+source)
}

func (d *Deployer) apply(ctx context.Context, st *stackfile.Stack, source string, dryRun bool, by *journal.Who, reload string) (Applied, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var a *messages.AuditEntry
	if by != nil && !dryRun {
		a = newAudit(messages.AuditApply, st.Name, "", *by)
		a.Message = reload
	}
	out, err := d.applyLocked(ctx, st, source, dryRun, a)
	if a != nil && reload != "" && a.Seq == 0 && err == nil {
		return out, nil // a reload that changed nothing
	}
	d.finishAudit(a, err)
	return out, err
}

// applyLocked is Apply; d.mu must be held. a, when set, is the audit
// entry the recorded change carries.
func (d *Deployer) applyLocked(ctx context.Context, st *stackfile.Stack, source string, dryRun bool, a *messages.AuditEntry) (Applied, error) {
	// Revisions and the declaration's digest hash the node key's digest
	// of each secret, as the definitions read back from the journal do
	// (SEC-2).
	if err := st.BindSecrets(d.key); err != nil {
		return Applied{}, fmt.Errorf("stack %s: %w", st.Name, err)
	}
	cur, found, err := d.current(st.Name)
	if err != nil {
		return Applied{}, err
	}
	if found && cur.Current.Source == SourceRemove {
		return Applied{}, fmt.Errorf("stack %s: %w; apply again once it is gone", st.Name, ErrRemoving)
	}
	digest, err := digestOf(st, d.key)
	if err != nil {
		return Applied{}, fmt.Errorf("stack %s: %w", st.Name, err)
	}
	var raw *stackfile.Stack
	if found {
		if raw, err = stackfile.Unmarshal(cur.Current.Definition, d.key); err != nil {
			return Applied{}, fmt.Errorf("stack %s: reading the current deployment: %w", st.Name, err)
		}
	}
	running := effective(raw, cur.Overrides)
	// A rollback holds while the file is the one it rolled back from.
	if pin, ok := cur.Override("", journal.FieldDeployment); found && ok && pin.File == digest {
		return Applied{Changes: stackfile.Plan(running, running), Notes: d.keptNotes(cur.Overrides)}, nil
	}
	kept, ended := sift(cur.Overrides, st, digest)
	next := effective(st, kept)
	out := Applied{Changes: stackfile.Plan(running, next), Notes: d.keptNotes(kept)}
	for _, e := range ended {
		out.Notes = append(out.Notes, droppedNote(e, dryRun))
	}
	if err := stackfile.Validate(ctx, next, d.node); err != nil {
		return out, err
	}
	redefined := !found || !unchanged(stackfile.Plan(raw, st))
	redeclared := !found || cur.Declared == nil || cur.Declared.Digest != digest || len(ended) > 0
	var revs map[string]string
	if redefined {
		var restarted []string
		revs, restarted = nextRevisions(st, cur, found)
		for _, name := range restarted {
			out.Notes = append(out.Notes, name+": restarted with what it depends on (depends_on restart: true)")
		}
	}
	out.Changes = withRunningRevisions(out.Changes, cur, found, revs)
	if dryRun || (!redefined && !redeclared) {
		return out, nil
	}
	decl := declarationOf(st, digest, source, d.now())
	change := journal.StackChange{Declared: &decl, SetOverrides: true, Overrides: kept, Audit: a}
	if a != nil {
		a.Plan = planLines(out.Changes)
		if !redefined && a.Message == "" {
			a.Message = "declaration recorded, the definition is unchanged"
		}
	}
	if redefined {
		dep, err := d.newDeployment(st, revs, source)
		if err != nil {
			return out, err
		}
		change.Deploy = &dep
	}
	if _, err := d.write(st.Name, change); err != nil {
		return out, fmt.Errorf("stack %s: recording the deployment: %w", st.Name, err)
	}
	for _, e := range ended {
		d.record(droppedEvent(e, d.now()))
	}
	d.liftStoppedGone(st)
	return out, d.tellCurrent(st.Name)
}

func (d *Deployer) keptNotes(overrides []journal.Override) []string {
	var out []string
	for _, o := range overrides {
		out = append(out, keptNote(o, d.now()))
	}
	return out
}

// newDeployment is st as a new deployment with the revisions
// nextRevisions gave it.
func (d *Deployer) newDeployment(st *stackfile.Stack, revs map[string]string, source string) (journal.Deployment, error) {
	def, err := stackfile.Marshal(st, d.key)
	if err != nil {
		return journal.Deployment{}, fmt.Errorf("stack %s: %w", st.Name, err)
	}
	return journal.Deployment{Definition: def, Revisions: revs, Source: source}, nil
}

// nextRevisions are the revisions of st's services as a deployment after
// cur: a service whose definition did not change keeps its revision (and
// a redeploy's suffix), and one that depends on a changed service with
// depends_on.X.restart: true is restarted with it (restarted).
func nextRevisions(st *stackfile.Stack, cur journal.StackState, found bool) (revs map[string]string, restarted []string) {
	revs = map[string]string{}
	for name, svc := range st.Services {
		revs[name] = svc.Revision()
		if found && baseRevision(cur.Current.Revisions[name]) == revs[name] {
			revs[name] = cur.Current.Revisions[name]
		}
	}
	if !found {
		return revs, nil
	}
	return revs, restartDependents(st, cur.Current.Revisions, revs)
}

// restartDependents gives a new revision suffix, in revs, to every service
// of st that depends with restart: true on a service whose revision moved
// from prev (Compose's depends_on.X.restart: the dependent is restarted
// when the dependency is updated or restarted), transitively and once
// each. A service new to the stack restarts nothing. It returns the
// services it restarted, sorted.
func restartDependents(st *stackfile.Stack, prev, revs map[string]string) []string {
	moved := map[string]bool{}
	for name, rev := range revs {
		if old, ok := prev[name]; ok && old != rev {
			moved[name] = true
		}
	}
	var restarted []string
	for again := true; again; {
		again = false
		for _, name := range st.Order {
			if moved[name] || prev[name] == "" {
				continue
			}
			for _, dep := range st.Services[name].DependsOn {
				if dep.Restart && moved[dep.Service] {
					revs[name] = nextSuffix(revs[name])
					moved[name], again = true, true
					restarted = append(restarted, name)
					break
				}
			}
		}
	}
	slices.Sort(restarted)
	return restarted
}

// withRunningRevisions says the revisions the services run, not the
// file's: a service redeployed runs its file's revision with a -rN
// suffix, kept while its definition is unchanged (the plan, computed from
// the files, would name the bare one and an operator, or the chaos
// campaign, would wait for a revision nothing runs).
func withRunningRevisions(changes []stackfile.Change, cur journal.StackState, found bool, next map[string]string) []stackfile.Change {
	for i, c := range changes {
		if rev := cur.Current.Revisions[c.Service]; found && rev != "" && baseRevision(rev) == c.FromRevision {
			changes[i].FromRevision = rev
		}
		switch {
		case next[c.Service] != "":
			changes[i].ToRevision = next[c.Service]
		case c.Action != stackfile.ActionRemove && baseRevision(changes[i].FromRevision) == c.ToRevision:
			changes[i].ToRevision = changes[i].FromRevision
		}
	}
	return changes
}

// nextSuffix is rev with its redeploy suffix -rN counted up.
func nextSuffix(rev string) string {
	n := 0
	if i := strings.Index(rev, "-r"); i >= 0 {
		n, _ = strconv.Atoi(rev[i+2:])
	}
	return baseRevision(rev) + "-r" + strconv.Itoa(n+1)
}

// liftStoppedGone lifts the stopped intent of a service the stack file no
// longer has: it is retired, and a service of that name added later is a
// new one (SVC-10, SVC-23).
func (d *Deployer) liftStoppedGone(st *stackfile.Stack) {
	stopped, err := d.journal.StoppedServices()
	if err != nil {
		return
	}
	for _, s := range stopped {
		if _, ok := st.Services[s.Service]; s.Stack != st.Name || ok {
			continue
		}
		if err := d.journal.StartService(s.Stack, s.Service); err != nil {
			continue
		}
		o := journal.Override{Stack: s.Stack, Service: s.Service, Field: messages.OverrideStopped, Value: "true"}
		if s.By != nil {
			o.By = *s.By
		}
		d.record(droppedEvent(dropped{o, "the stack file no longer has the service"}, d.now()))
	}
}

func unchanged(changes []stackfile.Change) bool {
	for _, c := range changes {
		if c.Action != stackfile.ActionUnchanged {
			return false
		}
	}
	return true
}

func baseRevision(rev string) string {
	if i := strings.Index(rev, "-r"); i >= 0 {
		return rev[:i]
	}
	return rev
}

// recordDeployment records st as the stack's new deployment, keeping its
// declaration and overrides, and tells the tree. It returns the state it
// recorded.
func (d *Deployer) recordDeployment(st *stackfile.Stack, revs map[string]string, source string, a *messages.AuditEntry) (journal.StackState, error) {
	def, err := stackfile.Marshal(st, d.key)
	if err != nil {
		return journal.StackState{}, fmt.Errorf("stack %s: %w", st.Name, err)
	}
	dep := journal.Deployment{Definition: def, Revisions: revs, Source: source}
	state, err := d.write(st.Name, journal.StackChange{Deploy: &dep, Audit: a})
	if err != nil {
		return state, fmt.Errorf("stack %s: recording the deployment: %w", st.Name, err)
	}
	return state, d.tellCurrent(st.Name)
}

// write performs one synced change of the stack's desired state (REL-3).
// A change that carries an audit entry (issue 17) that fails to be
// written is errRecording, unless the journal refused it.
func (d *Deployer) write(stack string, c journal.StackChange) (journal.StackState, error) {
	start := time.Now()
	state, err := d.journal.ChangeStack(stack, c)
	if d.observe != nil {
		d.observe(time.Since(start))
	}
	if err == nil {
		d.noteChange()
	}
	if a := c.Audit; a != nil {
		if err != nil {
			a.Seq = 0 // not on disk: finishAudit records the failure
			if !errors.Is(err, journal.ErrNotFound) && !errors.Is(err, journal.ErrNoPrevious) && !errors.Is(err, journal.ErrInvalid) {
				err = fmt.Errorf("%w: %w", errRecording, err)
			}
		} else {
			d.actors.set(stack, a.By.String())
		}
	}
	return state, err
}

// tellCurrent tells the tree the stack's desired state as the journal has
// it now, and publishes its overrides for status.
func (d *Deployer) tellCurrent(stack string) error {
	state, err := d.mustCurrent(stack)
	if err != nil {
		return err
	}
	m, err := d.applyMessage(state)
	if err != nil {
		return err
	}
	d.publish(state, m)
	d.tell(m)
	return nil
}

// record announces an event durably; an event lost with the journal is
// logged by the sink.
func (d *Deployer) record(ev messages.Event) {
	if d.announce != nil {
		d.announce(ev)
	}
}

// Changed is what a remove, rollback or redeploy did: the deployment it
// recorded and the changes service by service, as a plan shows them.
type Changed struct {
	Deployment uint64
	Changes    []stackfile.Change
	// Already is set when the request was in effect before (a stack
	// already being removed); nothing new was recorded.
	Already bool
}

// planDeployments compares two recorded deployments as they run: each
// with its stack's overrides (SVC-23). Revisions come from the journal, so
// a redeploy (same definition, new revision suffix) shows as an update; to
// nil is a removal of every service.
func planDeployments(key stackfile.NodeKey, from journal.Deployment, fromOverrides []journal.Override, to *journal.Deployment, toOverrides []journal.Override) ([]stackfile.Change, error) {
	fromDef, err := stackfile.Unmarshal(from.Definition, key)
	if err != nil {
		return nil, fmt.Errorf("deployment %d: %w", from.ID, err)
	}
	var toDef *stackfile.Stack
	var toRevs map[string]string
	if to != nil {
		if toDef, err = stackfile.Unmarshal(to.Definition, key); err != nil {
			return nil, fmt.Errorf("deployment %d: %w", to.ID, err)
		}
		toRevs = to.Revisions
	}
	changes := stackfile.Plan(effective(fromDef, fromOverrides), effective(toDef, toOverrides))
	for i, c := range changes {
		if r := from.Revisions[c.Service]; r != "" && c.FromRevision != "" {
			c.FromRevision = r
		}
		if r := toRevs[c.Service]; r != "" && c.ToRevision != "" {
			c.ToRevision = r
		}
		if c.FromRevision != "" && c.ToRevision != "" && c.FromRevision != c.ToRevision && c.Action != stackfile.ActionUpdate {
			c.Action = stackfile.ActionUpdate
		}
		changes[i] = c
	}
	return changes, nil
}

// changedTo is what moving from the state cur to the recorded state did.
func changedTo(key stackfile.NodeKey, cur, state journal.StackState) (Changed, error) {
	changes, err := planDeployments(key, cur.Current, cur.Overrides, &state.Current, state.Overrides)
	if err != nil {
		return Changed{Deployment: state.Current.ID}, fmt.Errorf("stack %s: %w", state.Stack, err)
	}
	return Changed{Deployment: state.Current.ID, Changes: changes}, nil
}

// Remove records that the stack is going and tells the tree; the journal
// forgets it once its actors have retired everything (Forget). It returns
// every service as a removal.
func (d *Deployer) Remove(stack string, by journal.Who) (out Changed, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := newAudit(messages.AuditRemove, stack, "", by)
	defer func() { d.finishAudit(a, err) }()
	cur, err := d.mustCurrent(stack)
	if err != nil {
		return Changed{}, err
	}
	out = Changed{Deployment: cur.Current.ID, Already: cur.Current.Source == SourceRemove}
	if out.Already {
		a.Message = "already being removed"
	}
	if out.Changes, err = planDeployments(d.key, cur.Current, cur.Overrides, nil, nil); err != nil {
		return out, fmt.Errorf("stack %s: %w", stack, err)
	}
	if !out.Already {
		def, err := stackfile.Unmarshal(cur.Current.Definition, d.key)
		if err != nil {
			return out, fmt.Errorf("stack %s: %w", stack, err)
		}
		state, err := d.recordDeployment(def, cur.Current.Revisions, SourceRemove, a)
		if err != nil {
			return out, err
		}
		out.Deployment = state.Current.ID
	}
	d.tell(messages.RemoveStack{Stack: stack})
	return out, nil
}

// Forget drops a removed stack from the journal once the tree is done.
func (d *Deployer) Forget(stack string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.journal.RemoveStack(stack); err != nil {
		return err
	}
	d.noteChange()
	d.unpublish(stack)
	return nil
}

// Scaled is what a scale did (SVC-17, SVC-23).
type Scaled struct {
	From, To int
	// File is the stack file's count; Override is the override now in
	// force (nil when the file's count runs); Changed is false when the
	// service already ran To.
	File     int
	Override *journal.Override
	Changed  bool
}

// Scale sets service's replicas to n as an override of the stack file's
// count, kept until the file changes it (SVC-23); scaling to the count
// the deployment declares drops the override instead. No deployment is
// recorded: a rollback is not undone by a scale, nor a scale by a
// rollback.
func (d *Deployer) Scale(stack, service string, n int, by journal.Who) (out Scaled, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := newAudit(messages.AuditScale, stack, service, by)
	defer func() { d.finishAudit(a, err) }()
	if n < 0 {
		return Scaled{}, fmt.Errorf("scale %s/%s: replicas must not be negative, got %d", stack, service, n)
	}
	cur, raw, err := d.currentService(stack, service)
	if err != nil {
		return Scaled{}, err
	}
	out = Scaled{From: effective(raw, cur.Overrides).Services[service].Deploy.Replicas, To: n, File: fileReplicas(cur, raw, service)}
	existing, has := cur.Override(service, journal.FieldReplicas)
	deployed := raw.Services[service].Deploy.Replicas
	if out.From == n {
		if has {
			out.Override = &existing
		}
		a.Message = fmt.Sprintf("already %d replicas", n)
		return out, nil
	}
	a.Message = fmt.Sprintf("replicas %d -> %d", out.From, n)
	overrides := without(cur.Overrides, service, journal.FieldReplicas)
	var set *journal.Override
	if n != deployed {
		set = &journal.Override{Stack: stack, Service: service, Field: journal.FieldReplicas,
			Value: strconv.Itoa(n), File: strconv.Itoa(out.File), Replaced: strconv.Itoa(out.From),
			Command: fmt.Sprintf("engenho scale %s/%s %d", stack, service, n), By: by, At: d.now()}
		overrides = append(overrides, *set)
	}
	if _, err := d.write(stack, journal.StackChange{SetOverrides: true, Overrides: overrides, Audit: a}); err != nil {
		return out, fmt.Errorf("scale %s/%s: %w", stack, service, err)
	}
	out.Override, out.Changed = set, true
	switch {
	case set != nil:
		d.record(overrideEvent(messages.KindOverrideSet, *set, d.now(), fmt.Sprintf(
			"%s/%s: replicas %d over the stack file's %d, by %s; kept until the file changes deploy.replicas", stack, service, n, out.File, by)))
	case has:
		d.record(droppedEvent(dropped{existing, fmt.Sprintf("scaled back to %d by %s", n, by)}, d.now()))
	}
	return out, d.tellCurrent(stack)
}

// Redeploy records a deployment that replaces every instance of service
// although its definition is the same (SVC-17). The declaration, the
// overrides and the deployment's source (a listed file stays the file's)
// stay.
func (d *Deployer) Redeploy(stack, service string, by journal.Who) (_ Changed, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := newAudit(messages.AuditRedeploy, stack, service, by)
	defer func() { d.finishAudit(a, err) }()
	cur, raw, err := d.currentService(stack, service)
	if err != nil {
		return Changed{}, err
	}
	revs := maps.Clone(cur.Current.Revisions)
	revs[service] = nextSuffix(revs[service])
	restartDependents(raw, cur.Current.Revisions, revs)
	state, err := d.recordDeployment(raw, revs, cur.Current.Source, a)
	if err != nil {
		return Changed{}, err
	}
	return changedTo(d.key, cur, state)
}

// currentService reads the stack's state and current definition, which
// must have service.
func (d *Deployer) currentService(stack, service string) (journal.StackState, *stackfile.Stack, error) {
	cur, err := d.mustLive(stack)
	if err != nil {
		return cur, nil, err
	}
	raw, err := stackfile.Unmarshal(cur.Current.Definition, d.key)
	if err != nil {
		return cur, nil, fmt.Errorf("stack %s: %w", stack, err)
	}
	if _, ok := raw.Services[service]; !ok {
		return cur, nil, fmt.Errorf("stack %s: %w %q", stack, ErrUnknownService, service)
	}
	return cur, raw, nil
}

// RolledBack is what a rollback did: the deployments, the changes service
// by service (Changed), and the override that keeps a reload from
// applying the stack file again (nil when the stack is back on the file's
// own deployment).
type RolledBack struct {
	Changed
	From, To uint64
	Override *journal.Override
}

// Rollback makes the previous deployment current and the current previous,
// so a second rollback undoes the first (SVC-17). Unless that brings the
// stack back to what its file declares, the rollback is an override: a
// reload or restart keeps it until the stack file changes (SVC-23).
func (d *Deployer) Rollback(stack string, by journal.Who) (_ RolledBack, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := newAudit(messages.AuditRollback, stack, "", by)
	defer func() { d.finishAudit(a, err) }()
	cur, err := d.mustLive(stack)
	if err != nil {
		return RolledBack{}, err
	}
	if cur.Previous == nil {
		return RolledBack{}, fmt.Errorf("rollback %s: %w", stack, journal.ErrNoPrevious)
	}
	file, target, err := rollbackDigests(cur, d.key)
	if err != nil {
		return RolledBack{}, fmt.Errorf("rollback %s: %w", stack, err)
	}
	out := RolledBack{From: cur.Current.ID, To: cur.Previous.ID}
	old, pinned := cur.Override("", journal.FieldDeployment)
	overrides := without(cur.Overrides, "", journal.FieldDeployment)
	if target != file {
		fileDep := strconv.FormatUint(cur.Current.ID, 10)
		if pinned {
			fileDep = old.Replaced // the file's deployment is the one first rolled back from
		}
		out.Override = &journal.Override{Stack: stack, Field: journal.FieldDeployment, Value: strconv.FormatUint(out.To, 10),
			File: file, Replaced: fileDep, Command: "engenho rollback " + stack, By: by, At: d.now()}
		overrides = append(overrides, *out.Override)
	}
	change := journal.StackChange{Rollback: true, SetOverrides: true, Overrides: overrides, Audit: a}
	if cur.Declared == nil {
		// Written before engenho kept declarations: the deployment rolled
		// back from is the file's, and a scale during the rollback needs
		// its counts.
		if raw, err := stackfile.Unmarshal(cur.Current.Definition, d.key); err == nil {
			decl := declarationOf(raw, file, cur.Current.Source, d.now())
			change.Declared = &decl
		}
	}
	state, err := d.write(stack, change)
	if err != nil {
		return out, fmt.Errorf("rollback %s: %w", stack, err)
	}
	var planErr error
	out.Changed, planErr = changedTo(d.key, cur, state)
	switch {
	case out.Override != nil:
		d.record(overrideEvent(messages.KindOverrideSet, *out.Override, d.now(), fmt.Sprintf(
			"%s: rolled back to deployment %d by %s; reloads keep it until the stack file changes (`engenho rollback %s` goes back)",
			stack, out.To, by, stack)))
	case pinned:
		d.record(droppedEvent(dropped{old, fmt.Sprintf("rolled back again by %s, to the stack file's deployment %d", by, out.To)}, d.now()))
	}
	return out, errors.Join(d.tellCurrent(stack), planErr)
}

// rollbackDigests: the stack file's declaration and the deployment a
// rollback goes to.
func rollbackDigests(cur journal.StackState, key stackfile.NodeKey) (file, target string, err error) {
	raw, err := stackfile.Unmarshal(cur.Current.Definition, key)
	if err != nil {
		return "", "", err
	}
	if file, err = fileDigest(cur, raw, key); err != nil {
		return "", "", err
	}
	prev, err := stackfile.Unmarshal(cur.Previous.Definition, key)
	if err != nil {
		return "", "", err
	}
	target, err = digestOf(prev, key)
	return file, target, err
}

// SetStopped records or lifts a service's stopped intent (SVC-10), synced
// before it returns; by is who asked.
func (d *Deployer) SetStopped(stack, service string, stopped bool, by journal.Who) (err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	op := messages.AuditServiceStart
	if stopped {
		op = messages.AuditServiceStop
	}
	a := newAudit(op, stack, service, by)
	defer func() { d.finishAudit(a, err) }()
	if _, _, err := d.currentService(stack, service); err != nil {
		return err
	}
	if stopped {
		err = d.journal.StopServiceAudited(stack, service, &by, a)
	} else {
		err = d.journal.StartServiceAudited(stack, service, a)
	}
	if err != nil {
		a.Seq = 0
		return fmt.Errorf("service %s/%s: %w: %w", stack, service, errRecording, err)
	}
	d.actors.set(stack, a.By.String())
	if st, found, err := d.journal.Stack(stack); err == nil && found {
		if m, err := d.applyMessage(st); err == nil {
			d.publish(st, m)
		}
	}
	d.tell(messages.ToService{Stack: stack, Service: service, Msg: messages.ServiceIntent{Stopped: stopped}})
	return nil
}

// Retry clears a service's backoff (SUP-17); no journal record.
func (d *Deployer) Retry(stack, service string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, _, err := d.currentService(stack, service); err != nil {
		return err
	}
	d.tell(messages.ToService{Stack: stack, Service: service, Msg: messages.ServiceRetry{}})
	return nil
}

func (d *Deployer) current(stack string) (journal.StackState, bool, error) {
	st, found, err := d.journal.Stack(stack)
	if err != nil {
		return st, false, fmt.Errorf("stack %s: reading the journal: %w", stack, err)
	}
	return st, found, nil
}

func (d *Deployer) mustCurrent(stack string) (journal.StackState, error) {
	st, found, err := d.current(stack)
	if err != nil {
		return st, err
	}
	if !found {
		return st, fmt.Errorf("stack %q: %w", stack, ErrUnknownStack)
	}
	return st, nil
}

// mustLive is mustCurrent for a change: a stack being removed takes none
// (it would come back).
func (d *Deployer) mustLive(stack string) (journal.StackState, error) {
	st, err := d.mustCurrent(stack)
	if err == nil && st.Current.Source == SourceRemove {
		return st, fmt.Errorf("stack %s: %w", stack, ErrRemoving)
	}
	return st, err
}

// applyMessage turns a journal record into the tree's message.
func (d *Deployer) applyMessage(st journal.StackState) (messages.ApplyStack, error) {
	cur, err := d.deployment(st.Current)
	if err != nil {
		return messages.ApplyStack{}, err
	}
	m := messages.ApplyStack{Stack: st.Stack, Current: cur, Stopped: map[string]bool{}}
	cur.Definition = *effective(&cur.Definition, st.Overrides)
	m.Current = cur
	if st.Previous != nil {
		prev, err := d.deployment(*st.Previous)
		prev.Definition = *effective(&prev.Definition, st.Overrides)
		if err != nil {
			return m, err
		}
		m.Previous = &prev
	}
	stopped, err := d.journal.StoppedServices()
	if err != nil {
		return m, err
	}
	for _, s := range stopped {
		if s.Stack == st.Stack {
			m.Stopped[s.Service] = true
		}
	}
	return m, nil
}

func (d *Deployer) deployment(dep journal.Deployment) (messages.StackDeployment, error) {
	st, err := stackfile.Unmarshal(dep.Definition, d.key)
	if err != nil {
		return messages.StackDeployment{}, fmt.Errorf("deployment %d: %w", dep.ID, err)
	}
	return messages.StackDeployment{ID: strconv.FormatUint(dep.ID, 10), Definition: *st, Revisions: dep.Revisions}, nil
}

// publish replaces what status shows of the stack's overrides.
func (d *Deployer) publish(st journal.StackState, m messages.ApplyStack) {
	stopped, _ := d.journal.StoppedServices()
	for {
		old := d.shown.Load()
		next := map[string]map[string][]messages.Override{}
		if old != nil {
			for k, v := range *old {
				next[k] = v
			}
		}
		next[st.Stack] = statusOverrides(st, m.Current.Definition.Order, stopped)
		if d.shown.CompareAndSwap(old, &next) {
			return
		}
	}
}

func (d *Deployer) unpublish(stack string) {
	for {
		old := d.shown.Load()
		if old == nil {
			return
		}
		next := map[string]map[string][]messages.Override{}
		for k, v := range *old {
			if k != stack {
				next[k] = v
			}
		}
		if d.shown.CompareAndSwap(old, &next) {
			return
		}
	}
}

// Overrides is what status shows of a service's overrides (SVC-23); it
// never waits on a change in progress (DMN-13).
func (d *Deployer) Overrides(stack, service string) []messages.Override {
	if m := d.shown.Load(); m != nil {
		return (*m)[stack][service]
	}
	return nil
}

// Stacks lists the current definitions, sorted by name.
func (d *Deployer) Stacks() ([]*stackfile.Stack, error) {
	states, err := d.journal.Stacks()
	if err != nil {
		return nil, err
	}
	var out []*stackfile.Stack
	for _, st := range states {
		def, err := stackfile.Unmarshal(st.Current.Definition, d.key)
		if err != nil {
			return nil, fmt.Errorf("stack %s: %w", st.Stack, err)
		}
		out = append(out, def)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

type stackSource struct{ stack, source string }

// Sources lists each stack with where its current deployment came from.
func (d *Deployer) Sources() []stackSource {
	states, err := d.journal.Stacks()
	if err != nil {
		return nil
	}
	var out []stackSource
	for _, st := range states {
		out = append(out, stackSource{st.Stack, st.Current.Source})
	}
	return out
}
