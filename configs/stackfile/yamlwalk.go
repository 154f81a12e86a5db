package stackfile

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Limits that keep a hostile file from costing much (REL-2).
const (
	maxFileBytes = 4 << 20
	// maxVisits bounds the keys and items read, counting every expansion
	// of an alias or merge key, so "billion laughs" stops early.
	maxVisits = 200_000
)

// position is where a key path was written.
type position struct{ line, col int }

// positions maps a key path to where the file wrote it.
type positions map[string]position

// lookup returns the position of key, or of its nearest written parent.
func (ps positions) lookup(key string) (position, bool) {
	for {
		if p, ok := ps[key]; ok {
			return p, true
		}
		if key == "" {
			return position{}, false
		}
		key = parentPath(key)
	}
}

// parentPath drops the last element of a dotted key path: a.b[2] → a.b,
// a.b → a, a → "".
func parentPath(key string) string {
	if strings.HasSuffix(key, "]") {
		if i := strings.LastIndexByte(key, '['); i >= 0 {
			return key[:i]
		}
	}
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[:i]
	}
	return ""
}

// join builds a key path. A key longer than any this format has (a
// 10k-character name) is shown cut short with its length, so a message
// stays one readable line.
func join(parent, key string) string {
	if len(key) > maxKeyShown {
		key = fmt.Sprintf("%s...(%d characters)", key[:maxKeyShown-16], len(key))
	}
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// maxKeyShown is the longest key a key path shows whole.
const maxKeyShown = 64

func index(parent string, i int) string { return fmt.Sprintf("%s[%d]", parent, i) }

// walker reads a yaml.Node tree, collecting problems with their location.
type walker struct {
	file     string
	problems []Problem
	warnings []Problem
	// unsetEnv collects the names an `environment` wrote without a value
	// that nothing sets (fromEnvironment): they unset env_file's value.
	unsetEnv map[string]bool
	// applyEnv and dotEnv are the interpolation sources (Options.Env, the
	// .env file); dir is the project directory, "" when files may not be
	// read.
	applyEnv, dotEnv map[string]string
	dir              string
	// uninterpolated are the scalars whose interpolation failed.
	uninterpolated map[*yaml.Node]bool
	// secretDefs are the top-level secrets, read before the services.
	secretDefs map[string]*secretDef
	pos        positions
	visits     int
	overrun    bool
	merging    map[*yaml.Node]bool
	// activeProfiles are the active Compose profiles (Options.Profiles).
	activeProfiles []string
}

func newWalker(file string) *walker {
	return &walker{file: file, pos: positions{}, merging: map[*yaml.Node]bool{}, uninterpolated: map[*yaml.Node]bool{}}
}

// problem records a problem at node n (nil: the start of the file).
func (w *walker) problem(n *yaml.Node, key string, kind error, format string, args ...any) {
	if n != nil && w.uninterpolated[n] {
		return // its interpolation failed: that is the one problem
	}
	w.problems = append(w.problems, w.located(n, key, kind, fmt.Sprintf(format, args...)))
}

// warn records a warning at node n: the file loads, but something in it
// does not mean what it does elsewhere (a Compose key engenho ignores, a
// variable that is not set).
func (w *walker) warn(n *yaml.Node, key string, format string, args ...any) {
	w.warnings = append(w.warnings, w.located(n, key, ErrWarning, fmt.Sprintf(format, args...)))
}

// located is a Problem at node n (nil: the start of the file).
func (w *walker) located(n *yaml.Node, key string, kind error, msg string) Problem {
	line, col := 1, 1
	if n != nil && n.Line > 0 {
		line, col = n.Line, n.Column
	}
	return Problem{File: w.file, Line: line, Column: col, Key: key, Msg: msg, Err: kind}
}

// at records where key was written.
func (w *walker) at(n *yaml.Node, key string) {
	if n != nil && n.Line > 0 {
		if _, ok := w.pos[key]; !ok {
			w.pos[key] = position{n.Line, n.Column}
		}
	}
}

// spend counts one visit; false once the budget is gone.
func (w *walker) spend(n *yaml.Node, key string) bool {
	w.visits++
	if w.visits > maxVisits {
		if !w.overrun {
			w.overrun = true
			w.problem(n, key, ErrSyntax, "file too complex: more than %d keys and items after expanding aliases", maxVisits)
		}
		return false
	}
	return true
}

// resolve follows an alias and refuses custom tags; nil when unusable.
func (w *walker) resolve(n *yaml.Node, key string) *yaml.Node {
	if n == nil {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			w.problem(n, key, ErrSyntax, "alias to an unknown anchor")
			return nil
		}
		n = n.Alias
	}
	if t := n.Tag; strings.HasPrefix(t, "!") && !strings.HasPrefix(t, "!!") && t != "!" {
		w.problem(n, key, ErrValue, "YAML tag %s is not supported", t)
		return nil
	}
	return n
}

// entry is one key of a mapping, merge keys already expanded.
type entry struct {
	key    string
	path   string
	kn, vn *yaml.Node
}

// mapping returns n's entries in file order, expanding merge keys (<<)
// and refusing duplicates. ok is false when n is not a mapping.
func (w *walker) mapping(n *yaml.Node, path string) ([]entry, bool) {
	n = w.resolve(n, path)
	if n == nil {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		w.problem(n, path, ErrType, "want a map, got %s", describe(n))
		return nil, false
	}
	if !w.spend(n, path) {
		return nil, false
	}
	w.at(n, path)
	explicit := map[string]bool{}
	firstAt := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn := n.Content[i]
		if isMergeKey(kn) {
			continue
		}
		if kn.Kind != yaml.ScalarNode {
			w.problem(kn, path, ErrType, "a key must be a plain word, got %s", describe(kn))
			continue
		}
		if explicit[kn.Value] {
			w.problem(kn, join(path, kn.Value), ErrValue, "key given twice (first at line %d); remove one", firstAt[kn.Value])
			continue
		}
		explicit[kn.Value] = true
		firstAt[kn.Value] = kn.Line
	}
	var out []entry
	added := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if isMergeKey(kn) {
			out = w.merge(out, added, explicit, vn, path)
			continue
		}
		if kn.Kind != yaml.ScalarNode || added[kn.Value] {
			continue
		}
		if !w.spend(kn, path) {
			return out, true
		}
		added[kn.Value] = true
		out = append(out, entry{key: kn.Value, path: join(path, kn.Value), kn: kn, vn: vn})
	}
	return out, true
}

// merge appends the entries of the mapping(s) vn merges in: a map, an
// alias to one, or a list of them, earlier ones taking precedence.
func (w *walker) merge(out []entry, added, explicit map[string]bool, vn *yaml.Node, path string) []entry {
	src := w.resolve(vn, path)
	if src == nil {
		return out
	}
	var sources []*yaml.Node
	switch src.Kind {
	case yaml.MappingNode:
		sources = []*yaml.Node{src}
	case yaml.SequenceNode:
		for _, item := range src.Content {
			if m := w.resolve(item, path); m != nil {
				sources = append(sources, m)
			}
		}
	}
	for _, m := range sources {
		if m.Kind != yaml.MappingNode {
			w.problem(m, path, ErrType, "a merge key (<<) takes a map or a list of maps, got %s", describeKind(m))
			continue
		}
		if w.merging[m] {
			w.problem(m, path, ErrSyntax, "a merge key (<<) refers to the map it is in")
			continue
		}
		w.merging[m] = true
		entries, _ := w.mapping(m, path)
		delete(w.merging, m)
		for _, e := range entries {
			if explicit[e.key] || added[e.key] {
				continue
			}
			added[e.key] = true
			out = append(out, e)
		}
	}
	return out
}

func isMergeKey(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "<<" && n.ShortTag() == "!!merge"
}

// sequence returns n's items; ok is false when n is not a list.
func (w *walker) sequence(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	n = w.resolve(n, path)
	if n == nil {
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		w.problem(n, path, ErrType, "want a list, got %s", describe(n))
		return nil, false
	}
	w.at(n, path)
	items := make([]*yaml.Node, 0, len(n.Content))
	for _, item := range n.Content {
		if !w.spend(item, path) {
			break
		}
		items = append(items, item)
	}
	return items, true
}

// scalar returns a non-null scalar node, or nil after recording a problem.
func (w *walker) scalar(n *yaml.Node, path, want string) *yaml.Node {
	n = w.resolve(n, path)
	if n == nil {
		return nil
	}
	w.at(n, path)
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		w.problem(n, path, ErrType, "want %s, got %s", want, describe(n))
		return nil
	}
	return n
}

// str reads a string; numbers and booleans are taken as written.
func (w *walker) str(n *yaml.Node, path string) (string, bool) {
	s := w.scalar(n, path, "a string")
	if s == nil {
		return "", false
	}
	return s.Value, true
}

// intValue reads an unquoted integer.
func (w *walker) intValue(n *yaml.Node, path, want string) (int, bool) {
	s := w.scalar(n, path, want)
	if s == nil {
		return 0, false
	}
	var v int64
	if s.ShortTag() != "!!int" || s.Decode(&v) != nil || v < -1<<31 || v > 1<<31-1 {
		w.problem(s, path, ErrType, "want %s, got %s", want, describe(s))
		return 0, false
	}
	return int(v), true
}

// count reads a non-negative integer.
func (w *walker) count(n *yaml.Node, path string) (int, bool) {
	v, ok := w.intValue(n, path, "a non-negative integer")
	if ok && v < 0 {
		w.problem(n, path, ErrValue, "want a non-negative integer, got %d", v)
		return 0, false
	}
	return v, ok
}

// positive reads an integer ≥ 1.
func (w *walker) positive(n *yaml.Node, path string) (int, bool) {
	v, ok := w.intValue(n, path, "a positive integer")
	if ok && v < 1 {
		w.problem(n, path, ErrValue, "want a positive integer, got %d", v)
		return 0, false
	}
	return v, ok
}

// boolean reads true or false.
func (w *walker) boolean(n *yaml.Node, path string) (bool, bool) {
	s := w.scalar(n, path, "true or false")
	if s == nil {
		return false, false
	}
	var v bool
	if s.ShortTag() != "!!bool" || s.Decode(&v) != nil {
		w.problem(s, path, ErrType, "want true or false, got %s", describe(s))
		return false, false
	}
	return v, true
}

// number reads a float; quoted numbers are accepted when quoted is true
// (Compose writes cpus: "0.5").
func (w *walker) number(n *yaml.Node, path string, quoted bool) (float64, bool) {
	s := w.scalar(n, path, "a number")
	if s == nil {
		return 0, false
	}
	tag := s.ShortTag()
	if tag == "!!int" || tag == "!!float" || (quoted && tag == "!!str") {
		if v, err := strconv.ParseFloat(strings.TrimSpace(s.Value), 64); err == nil && !math.IsNaN(v) && !math.IsInf(v, 0) {
			return v, true
		}
	}
	w.problem(s, path, ErrType, "want a number, got %s", describe(s))
	return 0, false
}

// duration reads a Go duration ("90s", "15m", "1h30m"), ≥ 0.
func (w *walker) duration(n *yaml.Node, path string) (time.Duration, bool) {
	s := w.scalar(n, path, "a duration like 30s")
	if s == nil {
		return 0, false
	}
	d, kind, msg := parseDuration(s.Value)
	if kind != nil {
		w.problem(s, path, kind, "%s", msg)
		return 0, false
	}
	return d, true
}

// strList reads a list of strings.
func (w *walker) strList(n *yaml.Node, path string) ([]string, bool) {
	items, ok := w.sequence(n, path)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	good := true
	for i, item := range items {
		s, ok := w.str(item, index(path, i))
		good = good && ok
		out = append(out, s)
	}
	return out, good
}

// describe renders a node for an error message: a kind, or a short quote
// of a scalar. Never use it on an env value.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.ShortTag() == "!!null" {
		return "nothing (null)"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	return strconv.Quote(v)
}

// describeKind renders only a node's kind, for values that may be secret.
func describeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.ShortTag() == "!!null" {
		return "nothing (null)"
	}
	return "a " + strings.TrimPrefix(n.ShortTag(), "!!")
}

// unknownKey records an unknown key with a hint when one is likely.
func (w *walker) unknownKey(e entry, allowed []string) {
	msg := "unknown key"
	if near := nearest(e.key, allowed); near != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", near)
	}
	w.problem(e.kn, e.path, ErrUnknownKey, "%s", msg)
}

// nearest returns the allowed key within edit distance 2 of key, if any.
func nearest(key string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := editDistance(key, a); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 99
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// isExtension reports whether key is an x-* extension key (ignored).
func isExtension(key string) bool { return strings.HasPrefix(key, "x-") }
