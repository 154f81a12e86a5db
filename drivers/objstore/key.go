package objstore

import (
	"fmt"
	"strings"
)

// MaxKeyLen is the longest key accepted (S3's own limit).
const MaxKeyLen = 1024

// ValidKey reports why key is not a valid object key, or nil. A key is one
// or more '/'-separated segments; each segment is non-empty, is not "." or
// "..", and uses only letters, digits and "._-=+@,:". Every store applies the
// same rule, so a key that works on fs works on S3 and no key can walk out of
// the fs store's directory (SEC-3). '~' is deliberately excluded: the fs store
// uses it to tell objects from directories.
func ValidKey(key string) error {
	if key == "" {
		return fmt.Errorf("empty key")
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("key longer than %d bytes", MaxKeyLen)
	}
	for _, seg := range strings.Split(key, "/") {
		if err := validSegment(seg); err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
	}
	return nil
}

// ValidPrefix reports why prefix is not a valid List prefix, or nil. The
// empty prefix lists everything; otherwise the prefix is a key, optionally
// ending in '/' and its last segment may be partial.
func ValidPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := ValidKey(strings.TrimSuffix(prefix, "/")); err != nil {
		return fmt.Errorf("prefix: %w", err)
	}
	return nil
}

// ValidName reports why name cannot be one key segment (a host, a node), or
// nil.
func ValidName(name string) error {
	if err := validSegment(name); err != nil {
		return fmt.Errorf("name %q: %w", name, err)
	}
	return nil
}

func validSegment(seg string) error {
	switch seg {
	case "":
		return fmt.Errorf("empty segment")
	case ".", "..":
		return fmt.Errorf("segment %q not allowed", seg)
	}
	for i := 0; i < len(seg); i++ {
		if !keyByte(seg[i]) {
			return fmt.Errorf("byte %q not allowed", seg[i])
		}
	}
	return nil
}

func keyByte(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("._-=+@,:", b) >= 0
}

// Join builds a key from segments, validating the result. A segment may
// itself contain '/' (a configured prefix such as "engenho/prod"); empty
// segments are dropped, so an empty prefix is allowed.
func Join(parts ...string) (string, error) {
	kept := make([]string, 0, len(parts))
	for _, p := range parts {
		if p = strings.Trim(p, "/"); p != "" {
			kept = append(kept, p)
		}
	}
	key := strings.Join(kept, "/")
	if err := ValidKey(key); err != nil {
		return "", err
	}
	return key, nil
}
