package stackfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/engenho/engenho/drivers"
)

// Redaction is what a secret value shows instead of itself.
const Redaction = "<secret>"

// NodeKey is the node's key as the stack file uses it (SEC-2): secret
// env values are sealed with it in the journal, and a revision hashes
// its keyed digest of a secret, never the secret. runtime/nodekey
// implements it.
type NodeKey interface {
	drivers.Sealer
	// Digest is a keyed digest of plaintext under label.
	Digest(label, plaintext string) string
}

// ErrNoNodeKey: a stack with secret values was to be written or read
// without the node key.
var ErrNoNodeKey = errors.New("secret env values need the node key")

// EnvValue is one environment value. A secret value never prints: fmt
// (every verb), String, json.Marshal and yaml.Marshal show Redaction.
// Only Reveal returns it, for the driver spec; Marshal (the journal's
// form) writes it only sealed under the node key (SEC-2).
type EnvValue struct {
	value    string
	secret   bool
	redacted bool // the value was dropped by Redacted; Reveal gives ""
	// digest is the node key's digest of the value (BindSecrets,
	// Unmarshal): what a revision hashes instead of the value.
	digest string
	// sealed is the value sealed under the node key, as read from the
	// journal or made by Marshal; reused so a record read and written
	// again is the same bytes.
	sealed string
	// encoding is how MarshalJSON writes a secret: redacted (the zero
	// value, for everything but these copies), sealed for the journal,
	// or compared (the plan's in-memory diff).
	encoding secretEncoding
}

type secretEncoding uint8

const (
	encodeRedacted secretEncoding = iota
	encodeSealed
	encodeCompared
)

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

// envJSON is the object form of a secret value in JSON. Value is read
// only, from journals written before values were sealed.
type envJSON struct {
	Value    *string `json:"value,omitempty"`
	Secret   bool    `json:"secret"`
	Sealed   string  `json:"sealed,omitempty"`
	Redacted bool    `json:"redacted,omitempty"`
	Compare  string  `json:"compare,omitempty"`
}

// MarshalJSON writes a plain value as a string and a secret one as
// {"secret":true,"redacted":true}, unless this copy was prepared by
// Marshal for the journal, which writes {"secret":true,"sealed":"v1:..."}.
func (e EnvValue) MarshalJSON() ([]byte, error) {
	switch {
	case !e.secret:
		return json.Marshal(e.value)
	case e.redacted:
	case e.encoding == encodeSealed:
		if e.sealed == "" {
			return nil, errUnsealed
		}
		return json.Marshal(envJSON{Secret: true, Sealed: e.sealed})
	case e.encoding == encodeCompared:
		return json.Marshal(envJSON{Secret: true, Compare: e.comparable()})
	}
	return json.Marshal(envJSON{Secret: true, Redacted: true})
}

var errUnsealed = errors.New("secret env value is not sealed")

// comparable stands for the value where two values are compared: the
// keyed digest when bound, else the value itself (kept in memory only).
func (e EnvValue) comparable() string {
	if e.digest != "" {
		return e.digest
	}
	return "plain:" + e.value
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
	case !o.Secret || o.Compare != "":
	case o.Sealed != "" && o.Value == nil:
		// Opened by Unmarshal, which has the node key.
		*e = EnvValue{secret: true, sealed: o.Sealed}
		return nil
	case o.Value != nil && o.Sealed == "":
		*e = Secret(*o.Value)
		return nil
	}
	return errors.New("env value: an object must be {\"secret\":true,\"sealed\":...}")
}

// MarshalYAML keeps yaml.Marshal from showing a secret.
func (e EnvValue) MarshalYAML() (any, error) { return e.String(), nil }

// revisionValue is what a revision hashes for the value: a secret's keyed
// digest once bound to the node key, so the revision shown in status
// cannot be used to test guesses of the secret.
func (e EnvValue) revisionValue() string {
	if e.secret && e.digest != "" {
		return e.digest
	}
	return e.value
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

// revisionValues is what a revision hashes of env (revisionValue).
func (env Env) revisionValues() map[string]string {
	if env == nil {
		return nil
	}
	out := make(map[string]string, len(env))
	for k, v := range env {
		out[k] = v.revisionValue()
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

// encoded returns a copy whose secrets MarshalJSON writes as enc.
func (env Env) encoded(enc secretEncoding) Env {
	out := env.clone()
	for k, v := range out {
		if v.secret {
			v.encoding = enc
			out[k] = v
		}
	}
	return out
}

// SecretLabel is the label a secret env value is sealed and digested
// under: its variable's name (drivers.Sealer).
func SecretLabel(key string) string { return "env:" + key }

// seal seals every secret not sealed yet, for the journal.
func (env Env) seal(key NodeKey) (Env, error) {
	out := env.encoded(encodeSealed)
	for k, v := range out {
		if !v.secret {
			continue
		}
		v, err := v.sealWith(key, SecretLabel(k))
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

// open opens every sealed secret under key, in place, and binds them.
func (env Env) open(key NodeKey) error {
	for k, v := range env {
		if !v.secret {
			continue
		}
		v, err := v.openWith(key, SecretLabel(k))
		if err != nil {
			return fmt.Errorf("env %s: %w", k, err)
		}
		env[k] = v
	}
	return env.bind(key)
}

// bind sets every secret's digest under key.
func (env Env) bind(key NodeKey) error {
	for k, v := range env {
		if !v.secret {
			continue
		}
		v, err := v.bindWith(key, SecretLabel(k))
		if err != nil {
			return fmt.Errorf("env %s: %w", k, err)
		}
		env[k] = v
	}
	return nil
}

// sealWith is v sealed under label (kept when redacted or sealed
// already). Secret env values and secret files (secrets.go) share it.
func (v EnvValue) sealWith(key NodeKey, label string) (EnvValue, error) {
	if v.redacted || v.sealed != "" {
		return v, nil
	}
	if key == nil {
		return v, ErrNoNodeKey
	}
	sealed, err := key.Seal(label, v.value)
	if err != nil {
		return v, err
	}
	v.sealed = sealed
	return v, nil
}

// openWith is v with its sealed value opened under label (kept when it
// is not sealed).
func (v EnvValue) openWith(key NodeKey, label string) (EnvValue, error) {
	if v.sealed == "" {
		return v, nil
	}
	if key == nil {
		return v, ErrNoNodeKey
	}
	plain, err := key.Open(label, v.sealed)
	if err != nil {
		return v, err
	}
	v.value = plain
	return v, nil
}

// bindWith is v with its digest under label (kept when redacted).
func (v EnvValue) bindWith(key NodeKey, label string) (EnvValue, error) {
	if v.redacted {
		return v, nil
	}
	if key == nil {
		return v, ErrNoNodeKey
	}
	v.digest = key.Digest(label, v.value)
	return v, nil
}
