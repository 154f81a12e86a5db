package journal

import (
	"sync"

	"github.com/engenho/engenho/messages"
)

// Subscription follows the event log (`engenho events -f`): it delivers
// every durable event after the starting point, in order, first the ones
// already in the journal, then new ones as they are committed. A slow
// reader never holds up appends: the subscription reads from the journal
// at its own pace. If retention removes events it had not yet delivered,
// it continues at the oldest one kept (the Seq jump shows it).
type Subscription struct {
	c    chan messages.Event
	stop chan struct{}
	done chan struct{}
	once sync.Once
	err  error // written before done is closed
}

// Subscribe follows events with Seq > after. Close the subscription when
// done; Close of the journal ends it too.
func (j *Journal) Subscribe(after uint64) *Subscription {
	s := &Subscription{
		c:    make(chan messages.Event, 64),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	if j.closed {
		s.err = ErrClosed
		close(s.c)
		close(s.done)
		return s
	}
	j.bg.Add(1)
	go j.follow(s, after)
	return s
}

// Events is closed when the subscription ends.
func (s *Subscription) Events() <-chan messages.Event { return s.c }

// Close ends the subscription and waits for its goroutine. Idempotent.
func (s *Subscription) Close() {
	s.once.Do(func() { close(s.stop) })
	<-s.done
}

// Err waits until the subscription has ended and says why: nil after
// Close, ErrClosed when the journal closed, else the read error.
func (s *Subscription) Err() error {
	<-s.done
	return s.err
}

func (j *Journal) follow(s *Subscription, cursor uint64) {
	defer j.bg.Done()
	defer close(s.done)
	defer close(s.c)
	for {
		wake := j.events.changed()
		evs, err := j.EventsAfter(cursor, followPage)
		if err != nil {
			s.err = err
			return
		}
		for _, ev := range evs {
			select {
			case s.c <- ev:
				cursor = ev.Seq
			case <-s.stop:
				return
			case <-j.closing:
				s.err = ErrClosed
				return
			}
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-wake:
		case <-s.stop:
			return
		case <-j.closing:
			s.err = ErrClosed
			return
		}
	}
}
