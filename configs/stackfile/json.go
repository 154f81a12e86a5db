package stackfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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

// Marshal renders st as canonical JSON for the journal (map keys sorted,
// defaults written out). Secret env values are written only sealed under
// key, as {"secret":true,"sealed":"v1:..."} (SEC-2): the journal must be
// able to recreate instances, but never holds a secret in plaintext.
// Everything else that encodes a Service with encoding/json (status,
// events, logs) gets {"secret":true,"redacted":true} instead. key may be
// nil for a stack without secrets.
//
// A stack read by Unmarshal gives the same bytes again (its sealed values
// are reused); a fresh seal has a fresh random nonce, so the same stack
// from a file gives other bytes each time.
func Marshal(st *Stack, key NodeKey) ([]byte, error) {
	if st == nil {
		return nil, errors.New("stackfile: marshal of a nil stack")
	}
	out := st.Clone()
	for name, svc := range out.Services {
		sealed, err := svc.forJournal(key)
		if err != nil {
			return nil, fmt.Errorf("stack %s: service %s: %w", st.Name, name, err)
		}
		out.Services[name] = sealed
	}
	return encodeRecord(out)
}

// encodeRecord is st's journal record as canonical JSON.
func encodeRecord(st *Stack) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(journalRecord{Format: journalFormat, Stack: st}); err != nil {
		return nil, fmt.Errorf("stack %s: encode: %w", st.Name, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Canonical renders st as Marshal does but with every secret env value
// written as the node key's digest of it (SEC-2): never the value, and
// never a seal, whose random nonce would give other bytes each time. The
// same definition gives the same bytes on this node whether it was just
// parsed from a file or read back from the journal, so a hash of them
// identifies a declaration across reloads and restarts (SVC-23). A stack
// with secrets needs key (ErrNoNodeKey); st itself is left unbound.
func Canonical(st *Stack, key NodeKey) ([]byte, error) {
	if st == nil {
		return nil, errors.New("stackfile: canonical form of a nil stack")
	}
	out := st.Clone()
	if err := out.BindSecrets(key); err != nil {
		return nil, fmt.Errorf("stack %s: %w", st.Name, err)
	}
	for name, svc := range out.Services {
		out.Services[name] = svc.forCompare()
	}
	return encodeRecord(out)
}

// Unmarshal reads what Marshal wrote, opens its sealed values with key
// and binds them to it (BindSecrets), and checks the stack (Stack.Check):
// a journal record that does not describe a valid stack is an error,
// never a half-read stack. A redacted dump (from status) is refused, and
// so is a sealed value that key does not open (nodekey.ErrWrongKey).
func Unmarshal(data []byte, key NodeKey) (*Stack, error) {
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
	if err := rec.Stack.openSecrets(key); err != nil {
		return nil, fmt.Errorf("stack record %s: %w", rec.Stack.Name, err)
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
	if st.Volumes != nil {
		out.Volumes = maps.Clone(st.Volumes)
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
	out.Labels = maps.Clone(s.Labels)
	out.Expose = slices.Clone(s.Expose)
	out.Profiles = slices.Clone(s.Profiles)
	out.Volumes = slices.Clone(s.Volumes)
	out.Secrets = cloneSecrets(s.Secrets)
	return out
}

// forJournal is a copy whose secret values MarshalJSON writes sealed.
func (s Service) forJournal(key NodeKey) (Service, error) {
	out := s.Clone()
	var err error
	if out.Env, err = out.Env.seal(key); err != nil {
		return out, err
	}
	if out.Secrets, err = sealSecrets(out.Secrets, key); err != nil {
		return out, err
	}
	for i := range out.Sidecars {
		if out.Sidecars[i].Env, err = out.Sidecars[i].Env.seal(key); err != nil {
			return out, fmt.Errorf("sidecar %s: %w", out.Sidecars[i].Name, err)
		}
	}
	return out, nil
}

// forCompare is a copy whose secrets MarshalJSON writes as their digest
// (or, unbound, their value): for the plan's in-memory comparison only.
func (s Service) forCompare() Service {
	out := s.Clone()
	out.Env = out.Env.encoded(encodeCompared)
	out.Secrets = encodeSecrets(out.Secrets, encodeCompared)
	for i := range out.Sidecars {
		out.Sidecars[i].Env = out.Sidecars[i].Env.encoded(encodeCompared)
	}
	return out
}

// BindSecrets binds every secret env value of st to the node key: a
// revision then hashes the key's digest of each secret instead of the
// secret (SEC-2), so it is the same on this node for the same value and
// useless for guessing the value. The daemon binds every stack before it
// plans or records it; Unmarshal binds what it reads. A stack without
// secrets needs no key.
func (st *Stack) BindSecrets(key NodeKey) error {
	if err := st.eachEnv(func(env Env) error { return env.bind(key) }); err != nil {
		return err
	}
	return st.eachSecrets(func(s []ServiceSecret) error { return bindSecrets(s, key) })
}

func (st *Stack) openSecrets(key NodeKey) error {
	if err := st.eachEnv(func(env Env) error { return env.open(key) }); err != nil {
		return err
	}
	return st.eachSecrets(func(s []ServiceSecret) error { return openSecrets(s, key) })
}

// eachEnv calls fn on every service's and sidecar's env, in place.
func (st *Stack) eachEnv(fn func(Env) error) error {
	for name, svc := range st.Services {
		if err := fn(svc.Env); err != nil {
			return fmt.Errorf("service %s: %w", name, err)
		}
		for _, sc := range svc.Sidecars {
			if err := fn(sc.Env); err != nil {
				return fmt.Errorf("service %s sidecar %s: %w", name, sc.Name, err)
			}
		}
	}
	return nil
}

// Redacted returns a copy of s with secret values dropped: safe to show,
// log or send anywhere (SEC-2). The values stay marked secret, and its
// Revision is meaningless; take the revision from the original.
func (s Service) Redacted() Service {
	out := s.Clone()
	out.Env = out.Env.Redacted()
	out.Secrets = redactSecrets(out.Secrets)
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
