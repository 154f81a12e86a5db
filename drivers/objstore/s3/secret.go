package s3

import (
	"fmt"

	"github.com/rs/zerolog"
)

// Secret is a credential. It prints, marshals and logs as "[redacted]";
// only Reveal gives the value, and only the signer calls it.
type Secret string

const redacted = "[redacted]"

// Reveal returns the secret's value.
func (s Secret) Reveal() string { return string(s) }

func (s Secret) String() string   { return s.mask() }
func (s Secret) GoString() string { return s.mask() }

// Format covers every fmt verb, %#v and %x included.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.mask()) }

func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.mask() + `"`), nil }
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.mask()), nil }

func (s Secret) mask() string {
	if s == "" {
		return ""
	}
	return redacted
}

// MarshalZerologObject logs a Config without its secrets.
func (c Config) MarshalZerologObject(e *zerolog.Event) {
	e.Str("endpoint", c.Endpoint).Str("region", c.Region).Str("bucket", c.Bucket).
		Bool("path_style", c.PathStyle).Str("access_key", c.AccessKey).
		Bool("static_credentials", c.SecretKey != "")
}
