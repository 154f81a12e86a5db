package lifecycle

import (
	"encoding/json"
	"fmt"

	"github.com/engenho/engenho/messages/step"
)

// Refused is the answer to a transition the lifecycle does not take: the
// state (unchanged), the event and the reason of the step.Refuse that Step
// returned. The daemon loop answers it to the operator as an error.
type Refused struct {
	State  State
	Event  Event
	Reason string
}

func (r *Refused) Error() string {
	return fmt.Sprintf("lifecycle: %s refused in %s: %s", eventName(r.Event), r.State.Name, r.Reason)
}

// MarshalJSON answers {"state": ..., "event": ..., "reason": ...}.
func (r *Refused) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		State  StateName `json:"state"`
		Event  string    `json:"event"`
		Reason string    `json:"reason"`
	}{r.State.Name, eventName(r.Event), r.Reason})
}

func eventName(e Event) string {
	if e == nil {
		return "<nil event>"
	}
	return e.String()
}

// Refusal returns the refusal among the effects Step returned for event e
// in state s, as the error the loop answers, or nil when e was taken.
func Refusal(s State, e Event, fx []step.Effect) *Refused {
	for _, f := range fx {
		if r, ok := f.(step.Refuse); ok {
			return &Refused{State: s, Event: e, Reason: r.Reason}
		}
	}
	return nil
}
