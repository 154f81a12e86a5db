package supervise

import (
	"sort"
	"sync"
	"time"
)

// Node is the published, immutable status of one live actor (SUP-1, SUP-3).
type Node struct {
	Path     string    `json:"path"`
	Gen      uint64    `json:"gen"`
	State    string    `json:"state"`
	Detail   string    `json:"detail,omitempty"`
	Restarts int       `json:"restarts"`
	Since    time.Time `json:"since"`
	// NextAttempt is when an actor in StateRestarting starts again.
	NextAttempt time.Time `json:"next_attempt,omitzero"`
}

// StateRestarting is the state of an actor that ended and waits out its
// supervisor's backoff before its next incarnation starts (SUP-21).
const StateRestarting = "restarting"

// Tree holds the latest published Node of every live actor. Actors write
// their own node; readers copy. Nobody waits on an actor to read it.
type Tree struct {
	nodes sync.Map // path -> Node
}

// NewTree returns an empty tree.
func NewTree() *Tree { return &Tree{} }

// publish makes n the node at its path, unless a later incarnation (a
// higher gen: gens only grow) has published there already: an ending
// incarnation's last words, or the waiting node of a dead one, never
// cover the live one (which publishes only when its state changes).
func (t *Tree) publish(n Node) {
	for {
		v, ok := t.nodes.Load(n.Path)
		if !ok {
			if _, loaded := t.nodes.LoadOrStore(n.Path, n); !loaded {
				return
			}
			continue
		}
		if v.(Node).Gen > n.Gen {
			return
		}
		if t.nodes.CompareAndSwap(n.Path, v, n) {
			return
		}
	}
}

// remove drops path if it is still the given incarnation's.
func (t *Tree) remove(path string, gen uint64) {
	if v, ok := t.nodes.Load(path); ok && v.(Node).Gen == gen {
		t.nodes.CompareAndDelete(path, v)
	}
}

// Get returns the node at path.
func (t *Tree) Get(path string) (Node, bool) {
	v, ok := t.nodes.Load(path)
	if !ok {
		return Node{}, false
	}
	return v.(Node), true
}

// Snapshot returns every live node sorted by path.
func (t *Tree) Snapshot() []Node {
	var out []Node
	t.nodes.Range(func(_, v any) bool {
		out = append(out, v.(Node))
		return true
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Len is the number of live actors.
func (t *Tree) Len() int {
	n := 0
	t.nodes.Range(func(_, _ any) bool { n++; return true })
	return n
}
