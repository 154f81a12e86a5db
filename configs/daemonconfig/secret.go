package daemonconfig

import "fmt"

// Secret is a credential from the config. It prints, marshals and logs as
// "[redacted]"; only Reveal gives the value (SEC-2).
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret's value, for the code that hands it to a
// client library.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) String() string   { return s.mask() }
func (s Secret) GoString() string { return s.mask() }

// Format covers every fmt verb, %#v and %x included.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.mask()) }

func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.mask() + `"`), nil }
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.mask()), nil }
func (s Secret) MarshalYAML() (any, error)    { return s.mask(), nil }

func (s Secret) mask() string {
	if s == "" {
		return ""
	}
	return redacted
}
