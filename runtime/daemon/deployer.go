package daemon

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/engenho/engenho/runtime/stackfile"
)

// SourceRemove marks a deployment recorded by `engenho remove`: the stack is
// being removed, and a restarted daemon goes on removing it.
const SourceRemove = "engenho remove"

// ErrStack kinds for desired-state requests.
var (
	ErrUnknownStack   = errors.New("unknown stack")
	ErrUnknownService = errors.New("unknown service")
	ErrRemoving       = errors.New("stack is being removed")
	ErrNotRunning     = errors.New("the runtime is not running")
)

// Deployer owns the node's desired state. Every change is recorded in the
// journal (synced) before the tree is told, so an acknowledged request
// survives a SIGKILL (REL-3). Changes to one node are serialized.
type Deployer struct {
	mu      sync.Mutex
	journal *journal.Journal
	node    stackfile.Node
	send    func(msg any) // to the root; nil while the tree is down
	// observe, when set, is told how long each synced intent write took.
	observe func(time.Duration)
}

// NewDeployer returns a deployer over j; node validates new definitions.
func NewDeployer(j *journal.Journal, node stackfile.Node) *Deployer {
	return &Deployer{journal: j, node: node}
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
	for _, st := range states {
		m, err := d.applyMessage(st)
		if err != nil {
			return nil, nil, fmt.Errorf("stack %s: %w", st.Stack, err)
		}
		out = append(out, m)
		if st.Current.Source == SourceRemove {
			removing = append(removing, st.Stack)
		}
	}
	return out, removing, nil
}

// Apply validates st and, unless dryRun, records it as the stack's new
// deployment and hands it to the tree. It returns the plan (SVC-4, SVC-5).
// A refused stack changes nothing (SVC-2).
func (d *Deployer) Apply(ctx context.Context, st *stackfile.Stack, source string, dryRun bool) ([]stackfile.Change, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, found, err := d.current(st.Name)
	if err != nil {
		return nil, err
	}
	if found && cur.Current.Source == SourceRemove {
		return nil, fmt.Errorf("stack %s: %w; apply again once it is gone", st.Name, ErrRemoving)
	}
	var curDef *stackfile.Stack
	if found {
		if curDef, err = stackfile.Unmarshal(cur.Current.Definition); err != nil {
			return nil, fmt.Errorf("stack %s: reading the current deployment: %w", st.Name, err)
		}
	}
	changes := stackfile.Plan(curDef, st)
	if err := stackfile.Validate(ctx, st, d.node); err != nil {
		return changes, err
	}
	if dryRun || (found && unchanged(changes)) {
		return changes, nil
	}
	revs := map[string]string{}
	for name, svc := range st.Services {
		revs[name] = svc.Revision()
		if found && baseRevision(cur.Current.Revisions[name]) == revs[name] {
			revs[name] = cur.Current.Revisions[name] // keep a redeploy's suffix
		}
	}
	if _, err := d.record(st, revs, source); err != nil {
		return changes, err
	}
	return changes, nil
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

func (d *Deployer) record(st *stackfile.Stack, revs map[string]string, source string) (journal.StackState, error) {
	def, err := stackfile.Marshal(st)
	if err != nil {
		return journal.StackState{}, fmt.Errorf("stack %s: %w", st.Name, err)
	}
	start := time.Now()
	state, err := d.journal.RecordDeployment(st.Name, journal.Deployment{Definition: def, Revisions: revs, Source: source})
	if d.observe != nil {
		d.observe(time.Since(start))
	}
	if err != nil {
		return state, fmt.Errorf("stack %s: recording the deployment: %w", st.Name, err)
	}
	m, err := d.applyMessage(state)
	if err != nil {
		return state, err
	}
	d.tell(m)
	return state, nil
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

// planDeployments compares two recorded deployments. Revisions come from
// the journal, so a redeploy (same definition, new revision suffix) shows
// as an update; to nil is a removal of every service.
func planDeployments(from journal.Deployment, to *journal.Deployment) ([]stackfile.Change, error) {
	fromDef, err := stackfile.Unmarshal(from.Definition)
	if err != nil {
		return nil, fmt.Errorf("deployment %d: %w", from.ID, err)
	}
	var toDef *stackfile.Stack
	var toRevs map[string]string
	if to != nil {
		if toDef, err = stackfile.Unmarshal(to.Definition); err != nil {
			return nil, fmt.Errorf("deployment %d: %w", to.ID, err)
		}
		toRevs = to.Revisions
	}
	changes := stackfile.Plan(fromDef, toDef)
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

// Remove records that the stack is going and tells the tree; the journal
// forgets it once its actors have retired everything (Forget). It returns
// every service as a removal.
func (d *Deployer) Remove(stack string) (Changed, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, err := d.mustCurrent(stack)
	if err != nil {
		return Changed{}, err
	}
	out := Changed{Deployment: cur.Current.ID, Already: cur.Current.Source == SourceRemove}
	if out.Changes, err = planDeployments(cur.Current, nil); err != nil {
		return out, fmt.Errorf("stack %s: %w", stack, err)
	}
	if !out.Already {
		def, err := stackfile.Unmarshal(cur.Current.Definition)
		if err != nil {
			return out, fmt.Errorf("stack %s: %w", stack, err)
		}
		state, err := d.record(def, cur.Current.Revisions, SourceRemove)
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
	return d.journal.RemoveStack(stack)
}

// Scale records a deployment with service's replicas set to n (SVC-17).
func (d *Deployer) Scale(stack, service string, n int) error {
	if n < 0 {
		return fmt.Errorf("scale %s/%s: replicas must not be negative, got %d", stack, service, n)
	}
	_, err := d.change(stack, service, func(st *stackfile.Stack, revs map[string]string) {
		svc := st.Services[service]
		svc.Deploy.Replicas = n
		st.Services[service] = svc
	})
	return err
}

// Redeploy records a deployment that replaces every instance of service
// although its definition is the same (SVC-17).
func (d *Deployer) Redeploy(stack, service string) (Changed, error) {
	return d.change(stack, service, func(st *stackfile.Stack, revs map[string]string) {
		base, n := baseRevision(revs[service]), 0
		if i := strings.Index(revs[service], "-r"); i >= 0 {
			n, _ = strconv.Atoi(revs[service][i+2:])
		}
		revs[service] = base + "-r" + strconv.Itoa(n+1)
	})
}

func (d *Deployer) change(stack, service string, edit func(*stackfile.Stack, map[string]string)) (Changed, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, err := d.mustCurrent(stack)
	if err != nil {
		return Changed{}, err
	}
	st, err := stackfile.Unmarshal(cur.Current.Definition)
	if err != nil {
		return Changed{}, fmt.Errorf("stack %s: %w", stack, err)
	}
	if _, ok := st.Services[service]; !ok {
		return Changed{}, fmt.Errorf("stack %s: %w %q", stack, ErrUnknownService, service)
	}
	revs := map[string]string{}
	for k, v := range cur.Current.Revisions {
		revs[k] = v
	}
	edit(st, revs)
	state, err := d.record(st, revs, "socket")
	if err != nil {
		return Changed{}, err
	}
	return changedTo(cur.Current, state)
}

// changedTo is what moving from a deployment to the recorded state did.
func changedTo(from journal.Deployment, state journal.StackState) (Changed, error) {
	changes, err := planDeployments(from, &state.Current)
	if err != nil {
		return Changed{Deployment: state.Current.ID}, fmt.Errorf("stack %s: %w", state.Stack, err)
	}
	return Changed{Deployment: state.Current.ID, Changes: changes}, nil
}

// Rollback makes the previous deployment current and the current previous,
// so a second rollback undoes the first (SVC-17).
func (d *Deployer) Rollback(stack string) (Changed, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, err := d.mustCurrent(stack)
	if err != nil {
		return Changed{}, err
	}
	state, err := d.journal.Rollback(stack)
	if err != nil {
		return Changed{}, fmt.Errorf("rollback %s: %w", stack, err)
	}
	m, err := d.applyMessage(state)
	if err != nil {
		return Changed{}, err
	}
	d.tell(m)
	return changedTo(cur.Current, state)
}

// SetStopped records or lifts a service's stopped intent (SVC-10), synced
// before it returns.
func (d *Deployer) SetStopped(stack, service string, stopped bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	cur, err := d.mustCurrent(stack)
	if err != nil {
		return err
	}
	st, err := stackfile.Unmarshal(cur.Current.Definition)
	if err != nil {
		return err
	}
	if _, ok := st.Services[service]; !ok {
		return fmt.Errorf("stack %s: %w %q", stack, ErrUnknownService, service)
	}
	if stopped {
		err = d.journal.StopService(stack, service)
	} else {
		err = d.journal.StartService(stack, service)
	}
	if err != nil {
		return fmt.Errorf("service %s/%s: %w", stack, service, err)
	}
	d.tell(messages.ToService{Stack: stack, Service: service, Msg: messages.ServiceIntent{Stopped: stopped}})
	return nil
}

// Retry clears a service's backoff (SUP-17); no journal record.
func (d *Deployer) Retry(stack, service string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := d.mustCurrent(stack); err != nil {
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

// applyMessage turns a journal record into the tree's message.
func (d *Deployer) applyMessage(st journal.StackState) (messages.ApplyStack, error) {
	cur, err := deployment(st.Current)
	if err != nil {
		return messages.ApplyStack{}, err
	}
	m := messages.ApplyStack{Stack: st.Stack, Current: cur, Stopped: map[string]bool{}}
	if st.Previous != nil {
		prev, err := deployment(*st.Previous)
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

func deployment(dep journal.Deployment) (messages.StackDeployment, error) {
	st, err := stackfile.Unmarshal(dep.Definition)
	if err != nil {
		return messages.StackDeployment{}, fmt.Errorf("deployment %d: %w", dep.ID, err)
	}
	return messages.StackDeployment{ID: strconv.FormatUint(dep.ID, 10), Definition: *st, Revisions: dep.Revisions}, nil
}

// Stacks lists the current definitions, sorted by name.
func (d *Deployer) Stacks() ([]*stackfile.Stack, error) {
	states, err := d.journal.Stacks()
	if err != nil {
		return nil, err
	}
	var out []*stackfile.Stack
	for _, st := range states {
		def, err := stackfile.Unmarshal(st.Current.Definition)
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
