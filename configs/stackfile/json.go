package stackfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// journalFormat versions the JSON that Marshal writes.
const journalFormat = 1

// journalRecord is the JSON form of a stack in the journal.
type journalRecord struct {
	Format int    `json:"format"`
	Stack  *Stack `json:"stack"`
}

// Marshal renders st as canonical JSON for the journal: the same stack
// always gives the same bytes (map keys sorted, defaults written out).
// Secret env values are kept, as {"secret":true,"value":"..."}, because
// the journal is the node's own private store and must be able to
// recreate instances; everything else that encodes a Service with
// encoding/json (status, events, logs) gets {"secret":true,"redacted":true}
// instead. Treat Marshal's output as secret.
func Marshal(st *Stack) ([]byte, error) {
	if st == nil {
		return nil, errors.New("stackfile: marshal of a nil stack")
	}
	out := st.Clone()
	for name, svc := range out.Services {
		out.Services[name] = svc.forJournal()
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(journalRecord{Format: journalFormat, Stack: out}); err != nil {
		return nil, fmt.Errorf("stack %s: encode: %w", st.Name, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Unmarshal reads what Marshal wrote and checks it (Stack.Check): a
// journal record that does not describe a valid stack is an error, never
// a half-read stack. A redacted dump (from status) is refused.
func Unmarshal(data []byte) (*Stack, error) {
	var rec journalRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return nil, fmt.Errorf("stack record: %w", err)
	}
	if dec.More() {
		return nil, errors.New("stack record: trailing data after the record")
	}
	if rec.Format != journalFormat {
		return nil, fmt.Errorf("stack record: format %d, this engenho reads %d", rec.Format, journalFormat)
	}
	if rec.Stack == nil {
		return nil, errors.New("stack record: no stack")
	}
	if rec.Stack.Services == nil {
		rec.Stack.Services = map[string]Service{}
	}
	if err := rec.Stack.Check(); err != nil {
		return nil, fmt.Errorf("stack record %s: %w", rec.Stack.Name, err)
	}
	return rec.Stack, nil
}

// Clone returns a deep copy of st.
func (st *Stack) Clone() *Stack {
	if st == nil {
		return nil
	}
	out := &Stack{
		Name:     st.Name,
		Source:   st.Source,
		Order:    slices.Clone(st.Order),
		Services: make(map[string]Service, len(st.Services)),
		pos:      st.pos, // never written after Parse
	}
	for name, svc := range st.Services {
		out.Services[name] = svc.Clone()
	}
	return out
}

// Clone returns a deep copy of s.
func (s Service) Clone() Service {
	out := s
	out.Command = slices.Clone(s.Command)
	out.Args = slices.Clone(s.Args)
	out.Env = s.Env.clone()
	out.Ports = slices.Clone(s.Ports)
	out.Healthcheck.Exec = slices.Clone(s.Healthcheck.Exec)
	out.DependsOn = slices.Clone(s.DependsOn)
	if s.Hibernate != nil {
		h := *s.Hibernate
		h.Seed = slices.Clone(h.Seed)
		out.Hibernate = &h
	}
	if s.Sidecars != nil {
		out.Sidecars = make([]Sidecar, len(s.Sidecars))
		for i, sc := range s.Sidecars {
			sc.Command = slices.Clone(sc.Command)
			sc.Env = sc.Env.clone()
			out.Sidecars[i] = sc
		}
	}
	out.Engenho.Backoff.Delays = slices.Clone(s.Engenho.Backoff.Delays)
	return out
}

// forJournal is a copy whose secret values MarshalJSON writes out.
func (s Service) forJournal() Service {
	out := s.Clone()
	out.Env = out.Env.withReveal()
	for i := range out.Sidecars {
		out.Sidecars[i].Env = out.Sidecars[i].Env.withReveal()
	}
	return out
}

// Redacted returns a copy of s with secret values dropped: safe to show,
// log or send anywhere (SEC-2). The values stay marked secret, and its
// Revision is meaningless; take the revision from the original.
func (s Service) Redacted() Service {
	out := s.Clone()
	out.Env = out.Env.Redacted()
	for i := range out.Sidecars {
		out.Sidecars[i].Env = out.Sidecars[i].Env.Redacted()
	}
	return out
}

// Redacted returns a copy of st with every secret value dropped.
func (st *Stack) Redacted() *Stack {
	out := st.Clone()
	if out == nil {
		return nil
	}
	for name, svc := range out.Services {
		out.Services[name] = svc.Redacted()
	}
	return out
}

// List returns the services in file order.
func (st *Stack) List() []Service {
	out := make([]Service, 0, len(st.Order))
	for _, name := range st.Order {
		if svc, ok := st.Services[name]; ok {
			out = append(out, svc)
		}
	}
	return out
}

// Service returns the named service.
func (st *Stack) Service(name string) (Service, bool) {
	svc, ok := st.Services[name]
	return svc, ok
}

// StartOrder returns the service names with every dependency before its
// dependents, ties in file order (for children started in order, SUP-7).
// It assumes no cycle, which Check guarantees.
func (st *Stack) StartOrder() []string {
	placed := map[string]bool{}
	var out []string
	var place func(name string, depth int)
	place = func(name string, depth int) {
		svc, ok := st.Services[name]
		if placed[name] || !ok || depth > len(st.Services) {
			return
		}
		for _, d := range svc.DependsOn {
			place(d.Service, depth+1)
		}
		if !placed[name] {
			placed[name] = true
			out = append(out, name)
		}
	}
	for _, name := range st.Order {
		place(name, 0)
	}
	return out
}

// String is a one-line summary; it never shows env values.
func (st *Stack) String() string {
	if st == nil {
		return "stack <nil>"
	}
	return fmt.Sprintf("stack %s (%d services: %s)", st.Name, len(st.Order), strings.Join(st.Order, ", "))
}
