package stackfile

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"path"
	"strconv"
	"strings"
	"unicode/utf8"
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

// NewInstanceID returns a fresh random instance id: 8 lower-case hex
// digits, a ValidInstanceID. Every actor that creates an instance (a
// replica, a host, a sidecar) takes its id from here.
func NewInstanceID() string {
	var b [4]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
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

// maxQuoted is how much of a value an error message quotes.
const maxQuoted = 40

// quote renders a user's value for an error message: Go-quoted, and cut
// short with its length when long, so a 10k-character name gives a
// readable one-line message. Never use it on an env value.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s (%d characters)", strconv.Quote(s[:cut]+"..."), len(s))
}

// nameProblem says what is wrong with a name that is not
// [a-z0-9][a-z0-9-]{0,62} (firstLetter: [a-z] first), quoting it short.
func nameProblem(what, s string, firstLetter bool) string {
	rule := "[a-z0-9][a-z0-9-]{0,62}"
	if firstLetter {
		rule = "[a-z][a-z0-9-]{0,62}"
	}
	return fmt.Sprintf("invalid %s name %s: %s (want %s: lower-case letters, digits and -)", what, quote(s), whyBadName(s, firstLetter, false), rule)
}

// whyBadName is the first thing wrong with s as a name of lower-case
// letters, digits and - (and _ with underscore), at most 63 long.
func whyBadName(s string, firstLetter, underscore bool) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > 63:
		return fmt.Sprintf("%d characters long, at most 63", len(s))
	case firstLetter && !(s[0] >= 'a' && s[0] <= 'z') || !isLowerAlnum(s[0]):
		return fmt.Sprintf("starts with %s", quoteByte(s, 0))
	}
	for i := 1; i < len(s); i++ {
		if !isLowerAlnum(s[i]) && s[i] != '-' && (!underscore || s[i] != '_') {
			return fmt.Sprintf("has %s at position %d", quoteByte(s, i), i+1)
		}
	}
	return ""
}

// hostProblem says what is wrong with an edge host that is not a valid
// lower-case DNS name.
func hostProblem(s, example string) string {
	var why string
	switch {
	case s == "":
		why = "empty"
	case len(s) > 253:
		why = fmt.Sprintf("%d characters long, at most 253", len(s))
	default:
		for _, label := range strings.Split(s, ".") {
			if len(label) == 0 {
				why = "has an empty label (two dots in a row, or a dot at an end)"
				break
			}
			if len(label) > 63 {
				why = fmt.Sprintf("has a label of %d characters, at most 63", len(label))
				break
			}
		}
		if why == "" {
			why = "want labels of lower-case letters, digits and inner hyphens"
		}
	}
	return fmt.Sprintf("want a lower-case DNS name like %s, got %s: %s", example, quote(s), why)
}

// quoteByte quotes the character at byte i of s.
func quoteByte(s string, i int) string {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return strconv.QuoteRune(r)
}

// envNameProblem says what is wrong with a variable name that is not
// [A-Za-z_][A-Za-z0-9_.-]* of at most 256 bytes.
func envNameProblem(s string) string {
	if len(s) > 256 {
		return fmt.Sprintf("invalid variable name: %d characters long, at most 256", len(s))
	}
	return "invalid variable name (want [A-Za-z_][A-Za-z0-9_.-]*)"
}
