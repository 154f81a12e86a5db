package stackfile

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzParse (REL-2): Parse never panics; a refusal is a *ParseError whose
// every problem carries a location in the named file; an accepted stack
// survives the journal round trip unchanged and validates its own
// invariants (Check).
func FuzzParse(f *testing.F) {
	for _, name := range exampleFiles {
		if data, err := os.ReadFile("../../configs/stacks/" + name); err == nil {
			f.Add(data)
		}
	}
	for _, seed := range []string{
		"",
		"services: {a: {command: x}}",
		stackYAML("ports: [\"8080:80\"]\nhealthcheck: {http: {}}\ndeploy: {replicas: 2}", true),
		stackYAML("env: [A=1]\nx-engenho: {secret_env: [A]}", true),
		"x: &a {<<: *a}\nservices: {a: {<<: *a}}",
		"services:\n  a: &a\n    command: x\n    <<: *a\n",
		"services: {a: {command: x, depends_on: [b]}, b: {command: y, depends_on: [a]}}",
		"services: [\n",
		"---\n---\n",
		"services: {a: {command: \"'\"}}",
		"services: {a: !!binary aGVsbG8=}",
		"services: {a: {command: x, ports: [\"[::1]:1:2\"]}}",
		// Input errors (issue 13): duplicates, long names, durations.
		"services:\n  a:\n    command: x\n    command: y\n  a: {command: z}\n",
		"services:\n  a:\n    command: x\n    env: [A=1, A=2]\n",
		"services:\n  " + strings.Repeat("n", 1100) + ":\n    command: x\n",
		"name: " + strings.Repeat("s", 300) + "\nservices: {a: {command: x, driver: " + strings.Repeat("d", 80) + "}}",
		"services: {a: {command: x, stop_grace_period: 99999999999h, healthcheck: {test: true, interval: 1e400s, timeout: -5s, start_period: 30}}}",
		"services: {a: {command: x, healthcheck: {test: true, interval: 87600h, retries: 2147483647, start_period: 87600h}}}",
		"services: {a: {command: x, env: {PW: {value: \"1234\", secret: true}}, sidecars: [{name: s, command: y, env: {T: {value: t, secret: true}}}]}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := Parse("fuzz.yaml", data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error is not a located *ParseError: %T %v", err, err)
			}
			for _, p := range pe.Problems {
				if p.File != "fuzz.yaml" || p.Line < 1 || p.Column < 1 || p.Msg == "" || p.Err == nil {
					t.Fatalf("problem without location or kind: %+v", p)
				}
				if len(p.String()) > 1000 {
					t.Fatalf("problem is not a readable line (%d bytes): %.300s", len(p.String()), p)
				}
			}
			return
		}
		if err := st.Check(); err != nil {
			t.Fatalf("accepted stack fails Check: %v", err)
		}
		if err := st.BindSecrets(testKey); err != nil {
			t.Fatalf("BindSecrets: %v", err)
		}
		data1, err := Marshal(st, testKey)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		back, err := Unmarshal(data1, testKey)
		if err != nil {
			t.Fatalf("Unmarshal(Marshal, testKey): %v\n%s", err, data1)
		}
		data2, _ := Marshal(back, testKey)
		if !bytes.Equal(data1, data2) {
			t.Fatalf("round trip changed the stack")
		}
		for _, c := range Plan(st, back) {
			if c.Action != ActionUnchanged {
				t.Fatalf("round trip plans %s", c)
			}
		}
		_ = FormatPlan(Plan(nil, st))
	})
}
