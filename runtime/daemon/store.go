package daemon

import (
	"fmt"
	"strconv"

	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/runtime/journal"
	"github.com/rs/zerolog"
)

// journalStore is the journal as the service actors use it (SVC-14).
type journalStore struct{ j *journal.Journal }

func (s journalStore) FailedRevisions(stack, service string) (map[string]bool, error) {
	all, err := s.j.FailedRevisions(stack)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, f := range all {
		if f.Service == service {
			out[strconv.FormatUint(f.Deployment, 10)+"/"+f.Revision] = true
		}
	}
	return out, nil
}

func (s journalStore) MarkFailed(stack, service, deployment, revision string) error {
	dep, err := strconv.ParseUint(deployment, 10, 64)
	if err != nil {
		return fmt.Errorf("deployment %q: %w", deployment, err)
	}
	return s.j.MarkFailed(journal.FailedRevision{Stack: stack, Service: service, Deployment: dep, Revision: revision})
}

func (s journalStore) SaveProgress(stack, service, deployment, revision string, done []int) error {
	dep, err := strconv.ParseUint(deployment, 10, 64)
	if err != nil {
		return fmt.Errorf("deployment %q: %w", deployment, err)
	}
	return s.j.SaveRollout(journal.RolloutProgress{Stack: stack, Service: service, Deployment: dep, Revision: revision, SlotsDone: done})
}

// eventSink takes the tree's events: it logs each and queues it in the
// journal without waiting for the disk.
type eventSink struct {
	j     *journal.Journal
	log   zerolog.Logger
	extra func(messages.Event)
	// actors stamps the events a deployment causes with who asked for it
	// (issue 17).
	actors *actors
}

func (e eventSink) Emit(ev messages.Event) {
	e.actors.stamp(&ev)
	e.logEvent(ev)
	if err := e.j.Emit(ev); err != nil {
		e.log.Error().Err(err).Str("kind", ev.Kind).Msg("event not recorded")
	}
	if e.extra != nil {
		e.extra(ev)
	}
}

// Record is Emit that returns once the event is on disk: for an event
// that announces a change of the desired state (SVC-23), so the answer
// to the request comes after it.
func (e eventSink) Record(ev messages.Event) {
	e.actors.stamp(&ev)
	e.logEvent(ev)
	if _, err := e.j.Append(ev); err != nil {
		e.log.Error().Err(err).Str("kind", ev.Kind).Msg("event not recorded")
	}
	if e.extra != nil {
		e.extra(ev)
	}
}

func (e eventSink) logEvent(ev messages.Event) {
	lvl := zerolog.InfoLevel
	switch ev.Level {
	case messages.LevelWarn:
		lvl = zerolog.WarnLevel
	case messages.LevelError:
		lvl = zerolog.ErrorLevel
	}
	e.log.WithLevel(lvl).Str("kind", ev.Kind).Str("stack", ev.Stack).Str("service", ev.Service).
		Str("instance", ev.Instance).Str("actor", ev.Actor).Msg(ev.Message)
}
