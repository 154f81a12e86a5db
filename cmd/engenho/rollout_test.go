package main

import (
	"testing"

	"github.com/engenho/engenho/messages"
)

// SVC-25, SVC-19: a rollout's status line names the strategy for a
// recreate and the order for a rolling update.
func TestSVC25RolloutLine(t *testing.T) {
	slots := []messages.SlotStatus{{Slot: 1, State: "updating"}, {Slot: 2, State: "updating"}}
	cases := []struct {
		name string
		r    messages.RolloutStatus
		want string
	}{
		{"recreate", messages.RolloutStatus{Revision: "b", From: "a", Order: "stop-first", Strategy: "recreate", Slots: slots},
			"rollout to b from a (recreate): slot 1 updating, 2 updating"},
		{"rolling", messages.RolloutStatus{Revision: "b", From: "a", Order: "start-first", Slots: slots},
			"rollout to b from a (start-first): slot 1 updating, 2 updating"},
	}
	for _, c := range cases {
		if got := rolloutLine(c.r); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
