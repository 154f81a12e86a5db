package daemon

import (
	"sync"

	"github.com/engenho/engenho/messages"
)

// maxMemEvents bounds the events kept while the journal is closed.
const maxMemEvents = 256

// memEvents keeps the daemon's own events while the journal is closed
// (stopped, failed, a damaged journal): `engenho events` still shows why
// the boot failed. They are numbered on their own (1, 2, ...) and are
// written to the journal, with numbers of its own, when it next opens.
type memEvents struct {
	mu      sync.Mutex
	evs     []messages.Event
	seq     uint64
	changed chan struct{} // closed and replaced at every add
}

func newMemEvents() *memEvents { return &memEvents{changed: make(chan struct{})} }

func (m *memEvents) add(ev messages.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	ev.Seq = m.seq
	m.evs = append(m.evs, ev)
	if len(m.evs) > maxMemEvents {
		m.evs = append(m.evs[:0], m.evs[len(m.evs)-maxMemEvents:]...)
	}
	close(m.changed)
	m.changed = make(chan struct{})
}

// after returns the events numbered above since, and a channel closed at
// the next add.
func (m *memEvents) after(since uint64) ([]messages.Event, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []messages.Event
	for _, ev := range m.evs {
		if ev.Seq > since {
			out = append(out, ev)
		}
	}
	return out, m.changed
}

// last is the number of the newest event kept.
func (m *memEvents) last() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.seq
}

// take hands over every event kept, for the journal, and forgets them.
func (m *memEvents) take() []messages.Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.evs
	m.evs = nil
	return out
}
