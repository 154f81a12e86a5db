package drivers

import "fmt"

// Secret is a credential (an object store's secret key, a session token).
// It prints, marshals and logs as "[redacted]"; only Reveal gives the
// value, for the code that hands it to a client library (SEC-2). The
// daemon config and the s3 backend share this one type.
type Secret string

// Redacted is what a Secret shows in place of its value.
const Redacted = "[redacted]"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

// Masked is what the secret shows: "" when empty, Redacted otherwise.
func (s Secret) Masked() string {
	if s == "" {
		return ""
	}
	return Redacted
}

func (s Secret) String() string   { return s.Masked() }
func (s Secret) GoString() string { return s.Masked() }

// Format covers every fmt verb, %#v and %x included.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.Masked()) }

func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.Masked() + `"`), nil }
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.Masked()), nil }
func (s Secret) MarshalYAML() (any, error)    { return s.Masked(), nil }
