package daemonconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// ResolveStacks expands c.Stacks now: each entry is a path or a glob
// (filepath.Match syntax: * ? [..]; no **), relative entries against the
// config file's directory. The result is absolute, sorted and without
// duplicates.
//
// A plain path must name an existing file: the operator listed it, so a
// typo is an error. A glob may match nothing (an empty stacks.d/ is fine);
// it skips directories and editor leftovers: names starting with '.'
// (swap files, dot-temporaries) or ending in '~'.
func ResolveStacks(c *Config) ([]string, error) {
	files, err := resolveStacks(filepath.Dir(c.File), c.Stacks)
	if err != nil {
		return nil, &Error{File: c.File, Key: err.key, Kind: ErrInvalid, Msg: err.msg}
	}
	return files, nil
}

type stackErr struct{ key, msg string }

func resolveStacks(dir string, patterns []string) ([]string, *stackErr) {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for i, pat := range patterns {
		key := "stacks[" + strconv.Itoa(i) + "]"
		if !filepath.IsAbs(pat) {
			pat = filepath.Join(dir, pat)
		}
		if !IsGlob(pat) {
			fi, err := os.Stat(pat)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return nil, &stackErr{key, fmt.Sprintf("stack file %s does not exist", pat)}
			case err != nil:
				return nil, &stackErr{key, fmt.Sprintf("stack file %s: %v", pat, unwrapPathError(err))}
			case fi.IsDir():
				return nil, &stackErr{key, fmt.Sprintf("%s is a directory; list its files with a glob such as %s", pat, filepath.Join(pat, "*.yaml"))}
			}
			add(filepath.Clean(pat))
			continue
		}
		matches, err := filepath.Glob(pat)
		if err != nil {
			return nil, &stackErr{key, fmt.Sprintf("bad glob pattern %q", pat)}
		}
		for _, m := range matches {
			if !GlobCandidate(m) {
				continue
			}
			if fi, err := os.Stat(m); err != nil || fi.IsDir() {
				continue
			}
			add(m)
		}
	}
	sort.Strings(out)
	return out, nil
}

// isGlob reports whether p has glob metacharacters.
func IsGlob(p string) bool { return strings.ContainsAny(p, `*?[\`) }

// globCandidate skips editor leftovers a glob would otherwise pick up.
func GlobCandidate(path string) bool {
	base := filepath.Base(path)
	return !strings.HasPrefix(base, ".") && !strings.HasSuffix(base, "~")
}

// StackDiff compares two resolved stack file lists (both sorted).
func StackDiff(old, new []string) (added, removed []string) {
	in := func(list []string, s string) bool {
		i := sort.SearchStrings(list, s)
		return i < len(list) && list[i] == s
	}
	for _, s := range new {
		if !in(old, s) {
			added = append(added, s)
		}
	}
	for _, s := range old {
		if !in(new, s) {
			removed = append(removed, s)
		}
	}
	return added, removed
}
