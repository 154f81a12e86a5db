package stackfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"go.yaml.in/yaml/v3"
)

// maxEnvFileBytes bounds a .env or env_file file.
const maxEnvFileBytes = 1 << 20

// loadDotEnv reads the .env file of the project directory, if there is
// one: Compose's format (compose-go's dotenv), its ${VAR} references
// resolved from Options.Env. Without a project directory nothing is read.
func (w *walker) loadDotEnv() {
	if w.dir == "" {
		return
	}
	path := filepath.Join(w.dir, ".env")
	vars, err := readEnvFile(path, w.envOnly, false)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		w.problems = append(w.problems, Problem{File: path, Line: envFileLine(err), Column: 1, Msg: envFileProblem(err), Err: ErrValue})
	default:
		w.dotEnv = vars
	}
}

func (w *walker) envOnly(name string) (string, bool) {
	v, ok := w.applyEnv[name]
	return v, ok
}

// readEnvFile parses one env file; references inside it resolve through
// lookup, then through the file's own earlier lines.
func readEnvFile(path string, lookup dotenv.LookupFn, raw bool) (map[string]string, error) {
	data, err := readRegularFile(path, maxEnvFileBytes, errEnvFile)
	if err != nil {
		return nil, err
	}
	if raw {
		return parseRawEnv(data)
	}
	vars, err := dotenv.ParseWithLookup(bytes.NewReader(data), lookup)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errEnvFile, err)
	}
	return vars, nil
}

// parseRawEnv reads Compose's raw env_file format: NAME=value a line, the
// value exactly as written (quotes kept, nothing expanded); blank lines
// and lines starting with # are skipped.
func parseRawEnv(data []byte) (map[string]string, error) {
	vars := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return nil, &fileError{errEnvFile, fmt.Sprintf("line %d: not NAME=value (format raw)", i+1)}
		}
		vars[name] = value
	}
	return vars, nil
}

// readRegularFile reads a file a stack file names (.env, env_file, a
// secret's file:), at most max bytes. It is opened non-blocking and must
// be a regular file, so a FIFO or a device cannot hang the parse; what is
// wrong with it is kind.
func readRegularFile(path string, max int, kind error) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		return nil, &fileError{kind, "is a directory"}
	}
	if !fi.Mode().IsRegular() {
		return nil, &fileError{kind, "not a regular file"}
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, &fileError{kind, fmt.Sprintf("larger than %d bytes", max)}
	}
	return data, nil
}

// fileError is what readRegularFile found wrong with a file; it never
// holds the file's content.
type fileError struct {
	kind error
	msg  string
}

func (e *fileError) Error() string { return e.kind.Error() + ": " + e.msg }
func (e *fileError) Unwrap() error { return e.kind }

var errEnvFile = errors.New("env file")

var envFileLineRE = regexp.MustCompile(`line (\d+):`)

func envFileLine(err error) int {
	if m := envFileLineRE.FindStringSubmatch(err.Error()); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			return n
		}
	}
	return 1
}

// envFileProblem says what is wrong with an env file without quoting its
// text: the parser's own messages can hold a value, and values may be
// secrets (SEC-2).
func envFileProblem(err error) string {
	msg := err.Error()
	var fe *fileError
	switch {
	case errors.As(err, &fe):
		return fe.msg
	case errors.Is(err, fs.ErrPermission):
		return "cannot be read: permission denied"
	// compose-go's dotenv has no error types: its texts are the only
	// way to tell its problems apart, and they may quote a value.
	case strings.Contains(msg, "key cannot contain a space"):
		return "a variable name holds a space (want NAME=value)"
	case strings.Contains(msg, "unexpected character"):
		return "a variable name holds a character other than [A-Za-z0-9_.-] (want NAME=value)"
	case strings.Contains(msg, "unterminated quoted value"):
		return "a quoted value is not closed"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return "cannot be read: " + pe.Err.Error()
	}
	return "not a valid env file (want NAME=value lines)"
}

// envFiles reads `env_file`: a path or a list of paths or {path, required,
// format}, relative to the project directory. Later files override
// earlier ones; `environment` overrides them all (Compose's precedence).
func (w *walker) envFiles(n *yaml.Node, path string, lookup dotenv.LookupFn) Env {
	r := w.resolve(n, path)
	if r == nil {
		return nil
	}
	var items []*yaml.Node
	if r.Kind == yaml.SequenceNode {
		items, _ = w.sequence(r, path)
	} else {
		items = []*yaml.Node{r}
	}
	env := Env{}
	for i, item := range items {
		itemPath := path
		if r.Kind == yaml.SequenceNode {
			itemPath = index(path, i)
		}
		file, required, raw, ok := w.envFileRef(item, itemPath)
		if !ok {
			continue
		}
		w.readEnvFileInto(env, item, itemPath, file, required, raw, lookup)
	}
	return env
}

var envFileKeys = []string{"path", "required", "format"}

// envFileRef reads one item: a string, or {path, required, format}.
func (w *walker) envFileRef(n *yaml.Node, path string) (file string, required, raw, ok bool) {
	r := w.resolve(n, path)
	if r == nil {
		return "", false, false, false
	}
	if r.Kind == yaml.ScalarNode {
		file, ok = w.str(r, path)
		return file, true, false, ok && w.envFilePathOK(r, path, file)
	}
	entries, ok := w.mapping(r, path)
	if !ok {
		return "", false, false, false
	}
	required, ok = true, true
	for _, e := range entries {
		switch e.key {
		case "path":
			var good bool
			file, good = w.str(e.vn, e.path)
			ok = ok && good && w.envFilePathOK(e.vn, e.path, file)
		case "required":
			var good bool
			required, good = w.boolean(e.vn, e.path)
			ok = ok && good
		case "format":
			f, good := w.str(e.vn, e.path)
			if good && f != "" && f != "raw" {
				w.problem(e.vn, e.path, ErrValue, "format %s is not supported: leave it out (Compose's .env format) or write raw", quote(f))
				ok = false
			}
			raw = f == "raw"
		default:
			w.unknownKey(e, envFileKeys)
			ok = false
		}
	}
	if file == "" && ok {
		w.problem(r, join(path, "path"), ErrMissing, "required")
		ok = false
	}
	return file, required, raw, ok
}

func (w *walker) envFilePathOK(n *yaml.Node, path, file string) bool {
	switch {
	case file == "":
		w.problem(n, path, ErrValue, "empty path")
		return false
	case w.dir == "" && !filepath.IsAbs(file):
		w.problem(n, path, ErrValue, "a relative path needs the stack file's directory: apply the stack from its file (engenho apply FILE)")
		return false
	}
	return true
}

func (w *walker) readEnvFileInto(env Env, n *yaml.Node, path, file string, required, raw bool, lookup dotenv.LookupFn) {
	full := file
	if !filepath.IsAbs(full) {
		full = filepath.Join(w.dir, file)
	}
	vars, err := readEnvFile(full, lookup, raw)
	if errors.Is(err, fs.ErrNotExist) {
		if required {
			w.problem(n, path, ErrValue, "%s does not exist (write {path: %s, required: false} if it may be missing)", full, file)
		}
		return
	}
	if err != nil {
		w.problem(n, path, ErrValue, "%s:%d: %s", full, envFileLine(err), envFileProblem(err))
		return
	}
	for k, v := range vars {
		if !validEnvName(k) {
			w.problem(n, path, ErrValue, "%s: %s", full, envNameProblem(k))
			continue
		}
		env[k] = Plain(v)
	}
}

// envKeys collects a service's `environment` (or its engenho spelling
// `env`, one of the two) and `env_file`.
type envKeys struct {
	given *entry // environment or env, whichever came first
	env   Env
	file  *entry          // env_file, read once environment is known
	unset map[string]bool // written bare and set nowhere: unset (Compose)
}

func (k *envKeys) read(w *walker, e entry) {
	if e.key == "env_file" {
		k.file = &e
		return
	}
	if k.given != nil {
		w.problem(e.kn, e.path, ErrValue, "%s and %s (line %d) are the same key: keep one", e.key, k.given.key, k.given.kn.Line)
		return
	}
	k.given = &e
	w.unsetEnv = map[string]bool{}
	k.env = w.env(e.vn, e.path)
	k.unset, w.unsetEnv = w.unsetEnv, nil
}

// merged is env_file's variables overridden by environment's; a name
// environment wrote bare and nothing sets is unset, whatever env_file
// says (Compose: environment wins "even if those values are empty or
// undefined"). A ${VAR} in an env file is looked up in the apply
// environment and .env, then in environment's own values (as Compose
// does), a secret's never: neither one written {value, secret: true} nor
// one secret_env names (secrets, marked after this).
func (k *envKeys) merged(w *walker, secretEnv []keyAt) Env {
	if k.file == nil {
		return k.env
	}
	secret := map[string]bool{}
	for _, s := range secretEnv {
		secret[s.name] = true
	}
	fromFile := w.envFiles(k.file.vn, k.file.path, func(name string) (string, bool) {
		if v, ok := w.lookup(name); ok {
			return v, true
		}
		if v, ok := k.env[name]; ok && !v.secret && !secret[name] {
			return v.value, true
		}
		return "", false
	})
	out := Env{}
	for n, v := range fromFile {
		if !k.unset[n] {
			out[n] = v
		}
	}
	for n, v := range k.env {
		out[n] = v
	}
	return out
}
