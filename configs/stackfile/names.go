package stackfile

import (
	"net/netip"
	"path"
	"strings"
)

// ValidName reports whether s is a valid stack, service or driver name:
// [a-z0-9][a-z0-9-]{0,62} (SVC-1). Such a name cannot hold a path
// separator or a dot, so it is safe in a file path (SEC-3).
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 63 || !isLowerAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isLowerAlnum(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// validSidecarName is a ValidName that starts with a letter, so a sidecar's
// instance name can never be read as a slot number.
func validSidecarName(s string) bool {
	return ValidName(s) && s[0] >= 'a' && s[0] <= 'z'
}

// ValidInstanceID reports whether id may end an instance name:
// [a-z0-9]{1,16}.
func ValidInstanceID(id string) bool {
	if len(id) == 0 || len(id) > 16 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !isLowerAlnum(id[i]) {
			return false
		}
	}
	return true
}

// ValidHost reports whether s is a lower-case DNS name: dot-separated
// labels of [a-z0-9] and inner hyphens, each 1..63 long, 253 in all. It
// cannot hold "/", ".." or an empty label, so it is safe in an object key
// or a path (SEC-3).
func ValidHost(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) == 0 || len(label) > 63 {
			return false
		}
		if !isLowerAlnum(label[0]) || !isLowerAlnum(label[len(label)-1]) {
			return false
		}
		for i := 0; i < len(label); i++ {
			if !isLowerAlnum(label[i]) && label[i] != '-' {
				return false
			}
		}
	}
	return true
}

// validEnvName: [A-Za-z_][A-Za-z0-9_.-]*, at most 256 bytes.
func validEnvName(s string) bool {
	if len(s) == 0 || len(s) > 256 {
		return false
	}
	c := s[0]
	if !(c == '_' || isLetter(c)) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '.' || c == '-' || isLetter(c) || isDigit(c)) {
			return false
		}
	}
	return true
}

// validUser: "USER[:GROUP]", each a number or a name [A-Za-z_][A-Za-z0-9_.-]*.
func validUser(s string) bool {
	user, group, hasGroup := strings.Cut(s, ":")
	if !validUserPart(user) {
		return false
	}
	return !hasGroup || validUserPart(group)
}

func validUserPart(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	if allDigits(s) {
		return true
	}
	if !(s[0] == '_' || isLetter(s[0])) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '.' || c == '-' || isLetter(c) || isDigit(c)) {
			return false
		}
	}
	return true
}

// validAbsPath: absolute, clean (no "..", no "//"), no NUL.
func validAbsPath(s string) bool {
	return strings.HasPrefix(s, "/") && path.Clean(s) == s && !strings.ContainsRune(s, 0)
}

// validIP reports whether s is an IPv4 or IPv6 address without a zone.
func validIP(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == ""
}

func isLowerAlnum(c byte) bool { return (c >= 'a' && c <= 'z') || isDigit(c) }
func isLetter(c byte) bool     { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }
func isDigit(c byte) bool      { return c >= '0' && c <= '9' }

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
