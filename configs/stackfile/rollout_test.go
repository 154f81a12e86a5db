package stackfile

import (
	"errors"
	"strings"
	"testing"
)

// SVC-25: the rollout strategy: x-engenho.rollout when written, Compose's
// stop-first with parallelism 0 or the replica count otherwise, rolling by
// default (one replica included).
func TestSVC25Strategy(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"default, 3 replicas", "deploy: {replicas: 3}", RolloutRolling},
		{"default, 1 replica", "", RolloutRolling},
		{"default with a healthcheck", "healthcheck: {test: [CMD, ok]}\ndeploy: {replicas: 3}", RolloutRolling},
		{"written recreate", "x-engenho: {rollout: recreate}\ndeploy: {replicas: 3}", RolloutRecreate},
		{"written recreate, 1 replica", "x-engenho: {rollout: recreate}", RolloutRecreate},
		{"written rolling beats Compose's form", "x-engenho: {rollout: rolling}\ndeploy: {replicas: 3, update_config: {parallelism: 0}}", RolloutRolling},
		{"Compose: stop-first, parallelism 0", "deploy: {replicas: 3, update_config: {parallelism: 0, order: stop-first}}", RolloutRecreate},
		{"Compose: parallelism = replicas", "deploy: {replicas: 3, update_config: {parallelism: 3}}", RolloutRecreate},
		{"Compose: parallelism above replicas", "deploy: {replicas: 2, update_config: {parallelism: 5}}", RolloutRecreate},
		{"Compose: parallelism below replicas", "deploy: {replicas: 3, update_config: {parallelism: 2}}", RolloutRolling},
		{"Compose: start-first is never recreate", "deploy: {replicas: 3, update_config: {parallelism: 0, order: start-first}}", RolloutRolling},
		{"Compose's form with one replica stays rolling", "deploy: {replicas: 1, update_config: {parallelism: 1}}", RolloutRolling},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := mustParse(t, "t.yaml", stackYAML(tc.body, true))
			if got := st.Services["api"].Strategy(); got != tc.want {
				t.Fatalf("strategy %q, want %q", got, tc.want)
			}
		})
	}
}

// SVC-25, SVC-1: a bad x-engenho.rollout is an error naming the file,
// line and key; recreate with order start-first is refused.
func TestSVC25RolloutErrors(t *testing.T) {
	cases := []struct {
		name, body, key string
		line            int
		kind            error
		msg             string
	}{
		{"unknown strategy", "x-engenho:\n  rollout: blue-green", "x-engenho.rollout", 2, ErrValue, `want rolling or recreate, got "blue-green"`},
		{"not a string", "x-engenho:\n  rollout: [recreate]", "x-engenho.rollout", 2, ErrType, "want a string"},
		{"recreate with start-first", "deploy:\n  update_config: {order: start-first}\nx-engenho:\n  rollout: recreate", "x-engenho.rollout", 4, ErrValue, "contradicts it"},
		{"misspelt key", "x-engenho:\n  rolout: recreate", "x-engenho.rolout", 2, ErrUnknownKey, "did you mean rollout?"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ps := parseProblems(t, "t.yaml", stackYAML(tc.body, true))
			if len(ps) != 1 {
				t.Fatalf("want one problem, got %d:\n%s", len(ps), (&ParseError{Problems: ps}).Error())
			}
			p := ps[0]
			if p.File != "t.yaml" || p.Key != "services.api."+tc.key || p.Line != tc.line+bodyOffset(true) {
				t.Errorf("at %s:%d key %q, want t.yaml:%d key services.api.%s", p.File, p.Line, p.Key, tc.line+bodyOffset(true), tc.key)
			}
			if !errors.Is(p.Err, tc.kind) || !strings.Contains(p.Msg, tc.msg) {
				t.Errorf("problem %v %q, want %v saying %q", p.Err, p.Msg, tc.kind, tc.msg)
			}
		})
	}
}

// SVC-25, SVC-3: the strategy is not in the revision; a change of it
// alone is a reconfigure, which replaces nothing.
func TestSVC25StrategyNotInRevision(t *testing.T) {
	a := mustParse(t, "t.yaml", stackYAML("deploy: {replicas: 3}", true))
	b := mustParse(t, "t.yaml", stackYAML("deploy: {replicas: 3}\nx-engenho: {rollout: recreate}", true))
	if a.Services["api"].Revision() != b.Services["api"].Revision() {
		t.Fatal("the rollout strategy changed the revision")
	}
	changes := Plan(a, b)
	if len(changes) != 1 || changes[0].Action != ActionReconfigure {
		t.Fatalf("plan %+v, want one reconfigure", changes)
	}
}
