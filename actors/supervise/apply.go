package supervise

import (
	"github.com/engenho/engenho/messages"
	"github.com/engenho/engenho/messages/step"
)

// Emitter records events (the journal, in the daemon). Each actor's Env
// carries one; nil drops events.
type Emitter interface {
	Emit(ev messages.Event)
}

// Shell is what Apply needs of an actor besides its handle.
type Shell struct {
	Timers *Timers
	Events Emitter
	// Event is stamped on every Emit: the actor's stack, service, instance
	// or host. Apply fills in the time, the actor's path and the effect.
	Event messages.Event
	// Own performs the core's own effects, in order among the shared ones.
	Own func(step.Effect)
}

// Apply performs a core's effects in order: timers, events, refusals and
// the end the same way for every actor (layers.md, "One Step/Effect
// contract"); every other effect goes to sh.Own.
func Apply(h *Handle, sh Shell, fx []step.Effect) {
	for _, f := range fx {
		switch f := f.(type) {
		case step.Arm:
			if !(f.Keep && sh.Timers.Armed(f.Timer)) {
				sh.Timers.Arm(f.Timer, f.At)
			}
		case step.Cancel:
			sh.Timers.Cancel(f.Timer)
		case step.Emit:
			emit(h, sh, f)
		case step.Refuse:
			h.Log().Warn().Str("reason", f.Reason).Msg("refused")
		case step.End:
			reason := f.Reason
			if reason == "" {
				reason = messages.ExitNormal
			}
			h.Exit(reason, nil)
		default:
			if sh.Own != nil {
				sh.Own(f)
			}
		}
	}
}

func emit(h *Handle, sh Shell, f step.Emit) {
	if sh.Events == nil {
		return
	}
	ev := sh.Event
	ev.UnixMs = h.Clock().Now().UnixMilli()
	ev.Level, ev.Kind, ev.Message, ev.Actor = f.Level, f.Kind, f.Message, h.Path()
	ev.Fingerprint = f.Fingerprint
	if f.Host != "" {
		ev.Host = f.Host
	}
	if len(f.Fields) > 0 {
		ev.Fields = make(map[string]string, len(f.Fields))
		for k, v := range f.Fields {
			ev.Fields[k] = v
		}
	}
	sh.Events.Emit(ev)
}
