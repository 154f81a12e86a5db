package drivers

import "fmt"

// MaxNameLen bounds an instance name (STACK-SERVICE-SLOT-ID fits easily).
const MaxNameLen = 200

// CheckName reports whether name is a valid instance name: 1 to MaxNameLen
// characters of [a-z0-9-], starting with a letter or digit. Drivers check it
// before a name reaches a path or an API (spec SEC-3); the error is returned
// unwrapped so a driver can wrap it with its own kind (ErrInvalid).
func CheckName(name string) error {
	if name == "" {
		return fmt.Errorf("instance name is empty")
	}
	if len(name) > MaxNameLen {
		return fmt.Errorf("instance name %.20q... is %d characters, more than %d", name, len(name), MaxNameLen)
	}
	for i, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' && i > 0
		if !ok {
			return fmt.Errorf("instance name %q: character %d (%q) is not one of [a-z0-9-] (names start with a letter or digit)", name, i+1, c)
		}
	}
	return nil
}
