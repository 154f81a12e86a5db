package lifecycle

import (
	"encoding/json"
	"fmt"
)

// Refused is the error of a transition the lifecycle does not take. The
// state is unchanged.
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
