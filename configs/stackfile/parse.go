package stackfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/engenho/engenho/configs/yamlkey"
	"go.yaml.in/yaml/v3"
)

// Options change how Parse reads a stack file.
type Options struct {
	// Name is the stack name the caller wants (e.g. from `engenho apply
	// --name`). It is used when the file has no top-level name; when the
	// file has one, the two must agree.
	Name string
	// Env is the environment given at apply time (the CLI's), from which
	// ${VAR} references and environment keys without a value take their
	// values; the .env file beside the stack file adds to it (Env wins).
	// Nil means none: the parser never reads its own process environment.
	Env map[string]string
	// Dir is the project directory: where .env and relative env_file
	// paths are looked up. Empty: no file is read (a stack given inline,
	// without a directory); ParseFile sets it to the file's directory.
	Dir string
	// Profiles are the active Compose profiles (`apply --profile`).
	Profiles []string
}

// Parse reads one stack file. filename names the file in every error
// (file:line: key: message) and, without a top-level `name`, gives the
// stack its name (web.yaml → web). The error, if any, is a *ParseError
// listing every problem found.
func Parse(filename string, data []byte) (*Stack, error) {
	return ParseWith(filename, data, Options{})
}

// ParseFile reads and parses the stack file at path.
func ParseFile(path string) (*Stack, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("stack file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("stack file %s: %w", path, err)
	}
	return ParseWith(path, data, Options{Dir: filepath.Dir(path)})
}

// ParseWith is Parse with options.
func ParseWith(filename string, data []byte, opts Options) (*Stack, error) {
	w := newWalker(filename)
	w.applyEnv, w.dir = opts.Env, opts.Dir
	w.activeProfiles = opts.Profiles
	w.loadDotEnv()
	st := &Stack{Source: filename, Services: map[string]Service{}}
	var nameNode *yaml.Node
	if root := w.document(data); root != nil {
		w.interpolate(root, "")
		nameNode = w.stack(root, st)
	}
	w.resolveName(st, nameNode, filename, opts.Name)
	settleVolumes(st)
	w.addChecks(checkStack(st))
	st.pos = w.pos
	sortProblems(w.warnings)
	if len(w.problems) > 0 {
		sortProblems(w.problems)
		return nil, &ParseError{Problems: w.problems, Warnings: w.warnings, partial: cleanServices(st, w.problems)}
	}
	st.Warnings = w.warnings
	return st, nil
}

func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
	})
}

// cleanServices is st without the services any problem is about: what a
// refused file still defines well enough to be checked against the node.
func cleanServices(st *Stack, ps []Problem) *Stack {
	bad := map[string]bool{}
	for _, p := range ps {
		if name, ok := serviceOf(p.Key); ok {
			bad[name] = true
		}
	}
	out := &Stack{Name: st.Name, Source: st.Source, Services: map[string]Service{}, pos: st.pos}
	for _, name := range st.Order {
		if svc, ok := st.Services[name]; ok && !bad[name] {
			out.Order = append(out.Order, name)
			out.Services[name] = svc
		}
	}
	return out
}

// serviceOf is the service a key path is about: services.NAME....
func serviceOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, "services.")
	if !ok {
		return "", false
	}
	if i := strings.IndexAny(rest, ".["); i >= 0 {
		rest = rest[:i]
	}
	return rest, rest != ""
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// document decodes data into its single YAML document's root node.
func (w *walker) document(data []byte) (root *yaml.Node) {
	if len(data) > maxFileBytes {
		w.problem(nil, "", ErrSyntax, "file is larger than %d bytes", maxFileBytes)
		return nil
	}
	defer func() {
		// The YAML library must not take the daemon down on odd input.
		if r := recover(); r != nil {
			w.problem(nil, "", ErrSyntax, "YAML parser failed on this file")
			root = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			w.problem(nil, "", ErrMissing, "file is empty: want a map with services")
			return nil
		}
		w.syntaxError(err, data)
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			w.syntaxError(err, data)
		} else {
			w.problem(&extra, "", ErrSyntax, "a stack file holds one YAML document; found a second")
		}
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		w.problem(&doc, "", ErrMissing, "file is empty: want a map with services")
		return nil
	}
	return doc.Content[0]
}

// syntaxError turns the YAML library's message into a located problem.
// The library gives its line only inside the message text. A key longer
// than YAML's limit gets a message that says so: the library's own
// ("mapping values are not allowed in this context") misleads.
func (w *walker) syntaxError(err error, data []byte) {
	if line, n, ok := yamlkey.Long(data); ok {
		w.problems = append(w.problems, Problem{File: w.file, Line: line, Column: 1, Err: ErrSyntax,
			Msg: fmt.Sprintf("a key of %d characters: YAML reads at most %d characters as a key, and names are at most 63", n, yamlkey.Max)})
		return
	}
	line, msg := 1, err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil && n > 0 {
			line, msg = n, m[2]
		}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	w.problems = append(w.problems, Problem{File: w.file, Line: line, Column: 1, Msg: "not valid YAML: " + msg, Err: ErrSyntax})
}

var topKeys = []string{"name", "version", "services", "volumes", "secrets"}

// stack reads the top level; it returns the `name` node, if any.
func (w *walker) stack(root *yaml.Node, st *Stack) (nameNode *yaml.Node) {
	entries, ok := w.mapping(root, "")
	if !ok {
		return nil
	}
	var services *entry
	for i, e := range entries {
		switch {
		case e.key == "name":
			if s, ok := w.str(e.vn, e.path); ok {
				st.Name, nameNode = s, w.resolve(e.vn, e.path)
			}
		case e.key == "version":
			// Ignored, as Compose does.
		case e.key == "services":
			services = &entries[i]
		case e.key == "volumes":
			w.topVolumes(e.vn, e.path, st)
		case e.key == "secrets":
			w.secretDefs = w.readSecretDefs(e.vn, e.path)
		case isExtension(e.key):
			// x-* keys hold anchors for merges; ignored.
		default:
			if !w.topKey(e) {
				w.unknownKey(e, topKeys)
			}
		}
	}
	if services == nil {
		w.problem(root, "services", ErrMissing, "required: a stack needs at least one service")
		return nameNode
	}
	svcs, ok := w.mapping(services.vn, "services")
	if !ok {
		return nameNode
	}
	if len(svcs) == 0 {
		w.problem(services.vn, "services", ErrMissing, "a stack needs at least one service")
	}
	for _, e := range svcs {
		if !ValidServiceName(e.key) {
			w.problem(e.kn, e.path, ErrValue, "%s", serviceNameProblem(e.key))
			continue
		}
		w.at(e.kn, e.path)
		svc := w.service(e.key, e.vn, e.path)
		st.Order = append(st.Order, e.key)
		st.Services[e.key] = svc
	}
	w.composeStack(st)
	return nameNode
}

// resolveName settles the stack's name from the file, the caller, or the
// file name, in that order.
func (w *walker) resolveName(st *Stack, nameNode *yaml.Node, filename, given string) {
	switch {
	case st.Name != "":
		if !ValidName(st.Name) {
			w.problem(nameNode, "name", ErrValue, "%s", nameProblem("stack", st.Name, false))
		} else if given != "" && given != st.Name {
			w.problem(nameNode, "name", ErrValue, "file names the stack %s but %s was asked for", quote(st.Name), quote(given))
		}
	case given != "":
		st.Name = given
		if !ValidName(given) {
			w.problem(nil, "name", ErrValue, "%s", nameProblem("stack", given, false))
		}
	default:
		st.Name = nameFromFile(filename)
		if !ValidName(st.Name) {
			w.problem(nil, "name", ErrMissing, "not set, and the file name does not make a stack name: %s; add a top-level name", nameProblem("stack", st.Name, false))
		}
	}
}

// nameFromFile is the file's base name without .yaml, .yml or .json.
func nameFromFile(filename string) string {
	base := filepath.Base(filename)
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		if strings.HasSuffix(base, ext) {
			return strings.TrimSuffix(base, ext)
		}
	}
	return base
}

// addChecks adds the typed checker's problems, located through the
// positions the walker recorded. A problem about a key that already has a
// decoding problem (or under or above one) is a consequence, not news.
func (w *walker) addChecks(ps []Problem) {
	decoded := make([]string, 0, len(w.problems))
	for _, p := range w.problems {
		decoded = append(decoded, p.Key)
	}
	for _, p := range ps {
		if related(p.Key, decoded) {
			continue
		}
		p.File = w.file
		if at, ok := w.pos.lookup(p.Key); ok {
			p.Line, p.Column = at.line, at.col
		} else {
			p.Line, p.Column = 1, 1
		}
		w.problems = append(w.problems, p)
	}
}

func related(key string, others []string) bool {
	for _, o := range others {
		if key == o || isUnder(key, o) || isUnder(o, key) {
			return true
		}
	}
	return false
}

// isUnder reports whether key is a path below parent.
func isUnder(key, parent string) bool {
	if parent == "" {
		return key != ""
	}
	if !strings.HasPrefix(key, parent) || len(key) == len(parent) {
		return false
	}
	c := key[len(parent)]
	return c == '.' || c == '['
}
