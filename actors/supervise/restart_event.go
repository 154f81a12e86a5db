package supervise

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/engenho/engenho/messages"
)

// RestartEvent is the event of one restart decision or escalation (SUP-18):
// `actor.restarted` names the actor, the reason, the failure count and the
// next attempt; `actor.escalated` names the supervisor that gave up. The
// stack, service and host come from the actor's path.
func RestartEvent(d Decision, now time.Time) messages.Event {
	ev := messages.Event{UnixMs: now.UnixMilli(), Actor: d.Actor}
	ev.Stack, ev.Service, ev.Host = PathSubject(d.Actor)
	if d.Escalated {
		ev.Kind, ev.Level = messages.KindActorEscalated, messages.LevelError
		ev.Message = "supervisor gave up: " + d.Err
		return ev
	}
	ev.Kind, ev.Level = messages.KindActorRestarted, messages.LevelWarn
	ev.Fields = map[string]string{"reason": string(d.Reason), "failures": strconv.Itoa(d.Failures),
		"next_attempt": d.At.UTC().Format(time.RFC3339Nano)}
	when := "at once"
	if wait := d.At.Sub(now); wait > 0 {
		when = fmt.Sprintf("in %s (at %s)", wait.Round(time.Millisecond), d.At.UTC().Format(time.RFC3339))
	}
	ev.Message = fmt.Sprintf("actor ended (%s), failure %d; restarting %s", d.Reason, d.Failures, when)
	if d.Err != "" {
		ev.Message = fmt.Sprintf("actor ended (%s: %s), failure %d; restarting %s", d.Reason, d.Err, d.Failures, when)
	}
	if len(d.Group) > 1 {
		ev.Message += " with " + strings.Join(d.Group, ", ")
	}
	return ev
}

// PathSubject reads the stack, service and host out of an actor path such
// as root/stack:shop/service:web/replica:1-ab12 or
// root/activator/host:notes.localhost.
func PathSubject(path string) (stack, service, host string) {
	for _, seg := range strings.Split(path, "/") {
		kind, name, ok := strings.Cut(seg, ":")
		if !ok {
			continue
		}
		switch kind {
		case "stack":
			stack = name
		case "service":
			service = name
		case "host":
			host = name
		}
	}
	return stack, service, host
}
