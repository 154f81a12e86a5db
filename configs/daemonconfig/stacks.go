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
	files, errs := resolveStacks(filepath.Dir(c.File), c.Stacks)
	if len(errs) > 0 {
		out := make(Errors, 0, len(errs))
		for _, e := range errs {
			out = append(out, &Error{File: c.File, Key: e.key, Kind: ErrInvalid, Msg: e.msg})
		}
		return nil, out
	}
	return files, nil
}

type stackErr struct{ key, msg string }

// resolveStacks expands every entry, and reports every entry that is
// wrong, not only the first.
func resolveStacks(dir string, patterns []string) ([]string, []stackErr) {
	var errs []stackErr
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
				errs = append(errs, stackErr{key, fmt.Sprintf("stack file %s does not exist", pat)})
			case err != nil:
				errs = append(errs, stackErr{key, fmt.Sprintf("stack file %s: %v", pat, unwrapPathError(err))})
			case fi.IsDir():
				errs = append(errs, stackErr{key, fmt.Sprintf("%s is a directory; list its files with a glob such as %s", pat, filepath.Join(pat, "*.yaml"))})
			default:
				add(filepath.Clean(pat))
			}
			continue
		}
		matches, err := filepath.Glob(pat)
		if err != nil {
			errs = append(errs, stackErr{key, fmt.Sprintf("bad glob pattern %s", quotePath(pat))})
			continue
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
	if len(errs) > 0 {
		return nil, errs
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
