package supervise

import (
	"sort"
	"sync"

	"github.com/engenho/engenho/messages"
)

// Board holds the latest snapshot of every stack, service and replica.
type Board struct {
	services sync.Map // "stack/service" -> *serviceEntry
	stacks   sync.Map // stack -> messages.StackStatus

	mu      sync.Mutex
	changed chan struct{} // closed at the next service change; nil while nobody waits
}

// Changed returns a channel that is closed at the next change of any
// service or replica snapshot: a waiter takes it, reads what it needs, and
// waits on it, so it misses no change and never polls (apply --wait).
func (b *Board) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed == nil {
		b.changed = make(chan struct{})
	}
	return b.changed
}

func (b *Board) notify() {
	b.mu.Lock()
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	b.mu.Unlock()
}

type serviceEntry struct {
	mu       sync.RWMutex
	status   messages.ServiceStatus
	replicas map[string]messages.ReplicaStatus // by instance id
}

// New returns an empty board.
func NewBoard() *Board { return &Board{} }

func key(stack, service string) string { return stack + "/" + service }

func (b *Board) entry(stack, service string) *serviceEntry {
	k := key(stack, service)
	if v, ok := b.services.Load(k); ok {
		return v.(*serviceEntry)
	}
	v, _ := b.services.LoadOrStore(k, &serviceEntry{replicas: map[string]messages.ReplicaStatus{}})
	return v.(*serviceEntry)
}

// PutReplica publishes a replica's snapshot.
func (b *Board) PutReplica(r messages.ReplicaStatus) {
	e := b.entry(r.Stack, r.Service)
	e.mu.Lock()
	e.replicas[r.ID] = r
	e.mu.Unlock()
	b.notify()
}

// DeleteReplica drops a replica that has ended.
func (b *Board) DeleteReplica(stack, service, id string) {
	e := b.entry(stack, service)
	e.mu.Lock()
	delete(e.replicas, id)
	e.mu.Unlock()
	b.notify()
}

// PutService publishes a service's snapshot (without its replicas).
func (b *Board) PutService(s messages.ServiceStatus) {
	e := b.entry(s.Stack, s.Service)
	e.mu.Lock()
	s.Replicas = nil
	e.status = s
	e.mu.Unlock()
	b.notify()
}

// DeleteService drops a removed service and its replicas.
func (b *Board) DeleteService(stack, service string) {
	b.services.Delete(key(stack, service))
	b.notify()
}

// Service returns a service's snapshot with its replicas sorted by slot.
func (b *Board) Service(stack, service string) (messages.ServiceStatus, bool) {
	v, ok := b.services.Load(key(stack, service))
	if !ok {
		return messages.ServiceStatus{}, false
	}
	return v.(*serviceEntry).copy(), true
}

func (e *serviceEntry) copy() messages.ServiceStatus {
	e.mu.RLock()
	s := e.status
	s.Replicas = make([]messages.ReplicaStatus, 0, len(e.replicas))
	for _, r := range e.replicas {
		s.Replicas = append(s.Replicas, r)
	}
	e.mu.RUnlock()
	sort.Slice(s.Replicas, func(i, j int) bool {
		a, b := s.Replicas[i], s.Replicas[j]
		if a.Slot != b.Slot {
			return a.Slot < b.Slot
		}
		return a.ID < b.ID
	})
	return s
}

// Services returns every service of stack (every service when stack is
// empty), sorted by stack and name.
func (b *Board) Services(stack string) []messages.ServiceStatus {
	var out []messages.ServiceStatus
	b.services.Range(func(_, v any) bool {
		e := v.(*serviceEntry)
		e.mu.RLock()
		st, name := e.status.Stack, e.status.Service
		e.mu.RUnlock()
		if name != "" && (stack == "" || st == stack) {
			out = append(out, e.copy())
		}
		return true
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Stack != out[j].Stack {
			return out[i].Stack < out[j].Stack
		}
		return out[i].Service < out[j].Service
	})
	return out
}

// Tally is a count over services' own snapshots (Board.Tally).
type Tally struct {
	Services, Converged       int
	Desired, Running, Healthy int
}

// Tally counts stack's services (every service's when stack is empty),
// those converged, and their desired, running and healthy replicas. It
// reads the services' own counts and copies no replica, so a waiter can
// call it often on a large node.
func (b *Board) Tally(stack string) Tally {
	var t Tally
	b.services.Range(func(_, v any) bool {
		e := v.(*serviceEntry)
		e.mu.RLock()
		s := &e.status
		if s.Service != "" && (stack == "" || s.Stack == stack) {
			t.Services++
			if s.State == messages.ServiceConverged {
				t.Converged++
			}
			t.Desired += s.Desired
			t.Running += s.Running
			t.Healthy += s.Healthy
		}
		e.mu.RUnlock()
		return true
	})
	return t
}

// PutStack publishes a stack's snapshot.
func (b *Board) PutStack(s messages.StackStatus) { b.stacks.Store(s.Stack, s) }

// DeleteStack drops a removed stack.
func (b *Board) DeleteStack(stack string) { b.stacks.Delete(stack) }

// Stacks returns every stack's snapshot sorted by name. A stack is
// converged only if each of its services is converged on the board now:
// the stack actor hears of a service's change a message later, and status
// never says converged beside a service that fails (SVC-19).
func (b *Board) Stacks() []messages.StackStatus {
	var out []messages.StackStatus
	b.stacks.Range(func(_, v any) bool {
		out = append(out, v.(messages.StackStatus))
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Stack < out[j].Stack })
	for i, st := range out {
		if !st.Converged {
			continue
		}
		for _, name := range st.Services {
			v, ok := b.services.Load(key(st.Stack, name))
			if !ok {
				continue // a host service: the activator reports it
			}
			e := v.(*serviceEntry)
			e.mu.RLock()
			state := e.status.State
			e.mu.RUnlock()
			if state != messages.ServiceConverged {
				out[i].Converged = false
				break
			}
		}
	}
	return out
}
