package drivers

import (
	"fmt"
	"path"
	"sort"
	"strings"
)

// MaxVolumeNameLen bounds a named volume's name.
const MaxVolumeNameLen = 128

// ValidVolumeName reports whether name may name a volume: 1 to
// MaxVolumeNameLen characters of [A-Za-z0-9._-], starting with a letter or
// digit. Such a name holds no "/" and is never "." or "..", so it is safe
// as a file name and as an incus storage volume name (spec SEC-3).
func ValidVolumeName(name string) bool {
	if name == "" || len(name) > MaxVolumeNameLen {
		return false
	}
	for i, c := range []byte(name) {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}

// CheckMounts reports what is wrong with a spec's mounts as values: a
// known type, a valid volume name or a clean absolute bind source, a
// clean absolute target other than "/", each target once. Drivers call it
// before a mount reaches a path or an API (SEC-3).
func CheckMounts(mounts []Mount) error {
	seen := map[string]bool{}
	for _, m := range mounts {
		switch m.Type {
		case MountVolume:
			if !ValidVolumeName(m.Source) {
				return fmt.Errorf("volume name %q: want [A-Za-z0-9._-], starting with a letter or digit, at most %d characters", m.Source, MaxVolumeNameLen)
			}
		case MountBind:
			if !cleanAbs(m.Source) {
				return fmt.Errorf("bind source %q: want a clean absolute path", m.Source)
			}
			if m.External {
				return fmt.Errorf("bind %s: only a volume is external", m.Source)
			}
		default:
			return fmt.Errorf("mount type %q: want %s or %s", m.Type, MountVolume, MountBind)
		}
		if !cleanAbs(m.Target) || m.Target == "/" {
			return fmt.Errorf("mount target %q: want a clean absolute path other than /", m.Target)
		}
		if seen[m.Target] {
			return fmt.Errorf("mount target %s is given twice", m.Target)
		}
		seen[m.Target] = true
	}
	return nil
}

func cleanAbs(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p && !strings.ContainsRune(p, 0)
}

// SortMounts orders mounts by target, so that a mount comes before any
// mount below it (a path sorts before the paths it is a prefix of).
func SortMounts(mounts []Mount) {
	sort.SliceStable(mounts, func(i, j int) bool { return mounts[i].Target < mounts[j].Target })
}

// ValidSecretFileName reports whether s may name a secret file: 1-255
// bytes, no "/" and no control character, not "." or "..". The stack
// file's secret names and targets follow the same rule.
func ValidSecretFileName(s string) bool {
	if s == "" || len(s) > 255 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' || s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// CheckSecretFiles reports what is wrong with a spec's secret files as
// values: each a ValidSecretFileName, given once, with a permission mode. Drivers call it before a name
// reaches a path (SEC-3); it never shows a value.
func CheckSecretFiles(files []SecretFile) error {
	seen := map[string]bool{}
	for _, f := range files {
		switch {
		case !ValidSecretFileName(f.Name):
			return fmt.Errorf("secret file name %q is not a file name (no '/' or control character, not '.' or '..')", f.Name)
		case seen[f.Name]:
			return fmt.Errorf("secret file %s is given twice", f.Name)
		case f.Mode&^0o777 != 0:
			return fmt.Errorf("secret file %s: mode %#o is not a permission mode", f.Name, f.Mode)
		}
		seen[f.Name] = true
	}
	return nil
}
