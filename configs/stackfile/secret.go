package stackfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// Redaction is what a secret value shows instead of itself.
const Redaction = "<secret>"

// EnvValue is one environment value. A secret value never prints: fmt
// (every verb), String, json.Marshal and yaml.Marshal show Redaction.
// Only Reveal returns it, for the driver spec, and only Marshal (the
// journal's form) writes it out (SEC-2).
type EnvValue struct {
	value    string
	secret   bool
	redacted bool // the value was dropped by Redacted; Reveal gives ""
	reveal   bool // set only on the copy Marshal encodes for the journal
}

// Plain is a value that may be shown.
func Plain(v string) EnvValue { return EnvValue{value: v} }

// Secret is a value that is never shown (SEC-2).
func Secret(v string) EnvValue { return EnvValue{value: v, secret: true} }

// IsSecret reports whether the value is marked secret.
func (e EnvValue) IsSecret() bool { return e.secret }

// IsRedacted reports whether the secret value was dropped by Redacted.
func (e EnvValue) IsRedacted() bool { return e.redacted }

// Reveal returns the real value. Call it only to hand the value to a
// driver; never log or print the result.
func (e EnvValue) Reveal() string { return e.value }

// String is the value, or Redaction for a secret.
func (e EnvValue) String() string {
	if e.secret {
		return Redaction
	}
	return e.value
}

// GoString keeps %#v from showing a secret.
func (e EnvValue) GoString() string {
	if e.secret {
		return "stackfile.Secret(" + fmt.Sprintf("%q", Redaction) + ")"
	}
	return "stackfile.Plain(" + fmt.Sprintf("%q", e.value) + ")"
}

// Format makes every fmt verb (%v %+v %s %q %x %#v ...) go through String
// or GoString, so a secret never reaches output by accident.
func (e EnvValue) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		fmt.Fprint(f, e.GoString())
	case verb == 'q':
		fmt.Fprintf(f, "%q", e.String())
	default:
		fmt.Fprint(f, e.String())
	}
}

// envJSON is the object form of a secret value in JSON.
type envJSON struct {
	Value    *string `json:"value,omitempty"`
	Secret   bool    `json:"secret"`
	Redacted bool    `json:"redacted,omitempty"`
}

// MarshalJSON writes a plain value as a string and a secret one as
// {"secret":true,"redacted":true}, unless this copy was prepared by
// Marshal for the journal, which keeps {"secret":true,"value":"..."}.
func (e EnvValue) MarshalJSON() ([]byte, error) {
	if !e.secret {
		return json.Marshal(e.value)
	}
	if e.reveal && !e.redacted {
		v := e.value
		return json.Marshal(envJSON{Value: &v, Secret: true})
	}
	return json.Marshal(envJSON{Secret: true, Redacted: true})
}

// errRedactedSecret refuses to read back a value that was redacted: a
// status dump is not a journal record.
var errRedactedSecret = errors.New("secret env value was redacted; only a journal record carries it")

// UnmarshalJSON reads either form that Marshal writes.
func (e *EnvValue) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*e = Plain(s)
		return nil
	}
	var o envJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return errors.New("env value: want a string or {\"secret\":true,\"value\":...}")
	}
	switch {
	case o.Redacted:
		return errRedactedSecret
	case !o.Secret || o.Value == nil:
		return errors.New("env value: an object must be {\"secret\":true,\"value\":...}")
	}
	*e = Secret(*o.Value)
	return nil
}

// MarshalYAML keeps yaml.Marshal from showing a secret.
func (e EnvValue) MarshalYAML() (any, error) { return e.String(), nil }

// equal compares values, ignoring how they were prepared for output.
func (e EnvValue) equal(o EnvValue) bool {
	return e.value == o.value && e.secret == o.secret && e.redacted == o.redacted
}

// Env is an environment: variable name to value.
type Env map[string]EnvValue

// Keys returns the variable names, sorted.
func (env Env) Keys() []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Reveal returns the environment with real values, for a driver spec.
func (env Env) Reveal() map[string]string {
	if env == nil {
		return nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v.value
	}
	return out
}

// Redacted returns a copy whose secret values are dropped (still marked
// secret, so status can show that a value exists).
func (env Env) Redacted() Env {
	if env == nil {
		return nil
	}
	out := make(Env, len(env))
	for k, v := range env {
		if v.secret {
			v = EnvValue{secret: true, redacted: true}
		}
		out[k] = v
	}
	return out
}

// Secrets returns the real secret values (non-empty ones), so error text
// from outside (a driver) can be scrubbed of them.
func (env Env) secrets() []string {
	var out []string
	for _, v := range env {
		if v.secret && v.value != "" {
			out = append(out, v.value)
		}
	}
	return out
}

func (env Env) clone() Env {
	if env == nil {
		return nil
	}
	out := make(Env, len(env))
	for k, v := range env {
		out[k] = v
	}
	return out
}

// withReveal marks every secret so MarshalJSON writes its value.
func (env Env) withReveal() Env {
	out := env.clone()
	for k, v := range out {
		if v.secret {
			v.reveal = true
			out[k] = v
		}
	}
	return out
}
