package daemonconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/engenho/engenho/configs/yamlkey"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// Overrides are settings from the command line. They win over the file
// and the environment.
type Overrides struct {
	// DataDir is --data-dir; a relative path is relative to the working
	// directory, as usual for a flag.
	DataDir string
	// ChaosBuild says the binary was built with fault injection (-tags
	// chaos, CHS-2). Without it chaos.enabled: true is an error: there are
	// no hooks to enable.
	ChaosBuild bool
}

// Load reads the config file at path once, applies environment overrides
// and defaults, resolves relative paths against the file's directory,
// expands the stack globs and validates everything.
//
// The Digest is of exactly the bytes parsed, and is returned even when the
// config is rejected, so a failed boot can tell whether the file changed
// since (Changed, DMN-16). The error is Errors (every problem, each an
// *Error naming the file, the key and the line or variable) or one *Error.
// A rejected file never yields a Config.
func Load(path string) (*Config, Digest, error) {
	return LoadWith(path, Overrides{})
}

// LoadWith is Load with command-line overrides.
func LoadWith(path string, o Overrides) (*Config, Digest, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, Digest{}, &Error{File: path, Kind: ErrRead, Msg: "cannot resolve the path", Err: err}
	}
	raw, err := os.ReadFile(abs)
	if err != nil {
		return nil, Digest{}, &Error{File: abs, Kind: ErrRead, Msg: "cannot read", Err: unwrapPathError(err)}
	}
	d := DigestOf(raw)
	cfg, err := parse(abs, raw, o)
	if err != nil {
		return nil, d, err
	}
	return cfg, d, nil
}

// unwrapPathError drops the path os.ReadFile repeats.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parser holds one parse: where each key is in the file, and the problems.
type parser struct {
	file  string
	lines map[string]int // dotted key (list items as key[i]) -> line
	errs  Errors
	// bad holds every key with a problem: a later stage neither converts
	// nor checks it again, so each mistake is reported once.
	bad map[string]bool
	// dropped: the walk removed duplicate keys from the tree, which the
	// merge then reads instead of the raw bytes.
	dropped    bool
	chaosBuild bool // Overrides.ChaosBuild
}

// fail reports a problem with key; later stages leave the key alone.
func (p *parser) fail(line int, key string, kind error, format string, args ...any) {
	p.bad[key] = true
	p.report(line, key, kind, format, args...)
}

// report adds a problem without marking the key: a duplicate's first
// value is still checked.
func (p *parser) report(line int, key string, kind error, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Key: key, Kind: kind, Msg: fmt.Sprintf(format, args...)})
}

// reported says whether key, a section above it or a key below it
// already has a problem.
func (p *parser) reported(key string) bool {
	for k := range p.bad {
		if k == key || strings.HasPrefix(key, k+".") || strings.HasPrefix(key, k+"[") ||
			strings.HasPrefix(k, key+".") || strings.HasPrefix(k, key+"[") {
			return true
		}
	}
	return false
}

// failKey reports a bad value of key, located in the file or the
// environment, whichever it came from; not when the key has a problem
// already.
func (p *parser) failKey(key string, format string, args ...any) {
	if p.reported(key) {
		return
	}
	p.bad[key] = true
	e := &Error{File: p.file, Key: key, Kind: ErrInvalid, Msg: fmt.Sprintf(format, args...)}
	base, _, _ := strings.Cut(key, "[")
	if l, ok := schema().byKey[base]; ok {
		if _, set := os.LookupEnv(l.env); set {
			e.Env = l.env
		}
	}
	if e.Env == "" {
		e.Line = p.lines[key]
		if e.Line == 0 {
			e.Line = p.lines[base]
		}
	}
	p.errs = append(p.errs, e)
}

// parse turns the file's bytes into a validated Config. Every stage
// runs, whatever the one before found: the keys' shapes (walk), their
// values (merge), the rules between them (validate) and the stack files
// (resolveStacks), so one answer lists every problem. A key with a
// problem takes its default for the later stages and gets no second one.
func parse(file string, raw []byte, o Overrides) (*Config, error) {
	p := &parser{file: file, lines: map[string]int{}, bad: map[string]bool{}, chaosBuild: o.ChaosBuild}
	root, err := p.document(raw)
	if err != nil {
		return nil, err
	}
	p.walk(schema().root, root)
	cfg := p.merge(raw, root)
	if cfg == nil {
		return nil, p.errs
	}
	if o.DataDir != "" {
		abs, err := filepath.Abs(o.DataDir)
		if err != nil {
			return nil, &Error{File: file, Key: "data_dir", Kind: ErrInvalid, Msg: "--data-dir: cannot resolve the path", Err: err}
		}
		cfg.DataDir = abs
		delete(p.lines, "data_dir")
	}
	cfg.File = file
	p.resolvePaths(cfg)
	p.validate(cfg)
	if !p.bad["stacks"] {
		files, errs := resolveStacks(filepath.Dir(file), cfg.Stacks)
		for _, err := range errs {
			p.failKey(err.key, "%s", err.msg)
		}
		cfg.StackFiles = files
	}
	if len(p.errs) > 0 {
		sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
		return nil, p.errs
	}
	cfg.Warnings = append(cfg.Warnings, envWarnings(os.Environ())...)
	if cfg.Drain.Budget > systemdStopTimeout {
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("drain.budget %s is longer than systemd's default TimeoutStopSec (%s): raise TimeoutStopSec in the unit too", cfg.Drain.Budget, systemdStopTimeout))
	}
	return cfg, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// document parses raw as exactly one YAML document whose top is a mapping.
func (p *parser) document(raw []byte) (*yaml.Node, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, &Error{File: p.file, Kind: ErrEmpty, Msg: "the file is empty (a file being rewritten can look empty for a moment; write {} for all defaults)"}
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: p.file, Kind: ErrEmpty, Msg: "the file holds only comments (write {} for all defaults)"}
		}
		return nil, p.syntaxIn(err, raw)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, p.syntaxIn(err, raw)
		}
		return nil, &Error{File: p.file, Line: extra.Line, Kind: ErrSyntax, Msg: "more than one YAML document; the config is one document"}
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	top = deref(top)
	if isNull(top) {
		return nil, &Error{File: p.file, Line: top.Line, Kind: ErrEmpty, Msg: "the file holds no settings (write {} for all defaults)"}
	}
	if top.Kind != yaml.MappingNode {
		return nil, &Error{File: p.file, Line: top.Line, Kind: ErrSyntax, Msg: "the top level must be a mapping of keys, not " + kindName(top)}
	}
	return top, nil
}

// syntax turns a YAML parser error into an *Error with its line. The
// parser's messages say what is wrong, never quote values. The parser
// leaves out the line when it is the first.
func (p *parser) syntax(err error) *Error {
	msg := err.Error()
	e := &Error{File: p.file, Kind: ErrSyntax, Line: 1}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	e.Msg = "invalid YAML: " + msg
	return e
}

// syntaxIn is syntax for the file's own bytes: a key longer than YAML
// allows gets a message that says so, as the parser's own ("mapping
// values are not allowed in this context") misleads.
func (p *parser) syntaxIn(err error, raw []byte) *Error {
	if line, n, ok := yamlkey.Long(raw); ok {
		return &Error{File: p.file, Line: line, Kind: ErrSyntax,
			Msg: fmt.Sprintf("invalid YAML: a key of %d characters; YAML reads at most %d characters as a key (config keys are short words like log.level)", n, yamlkey.Max)}
	}
	return p.syntax(err)
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value"
	}
	return "something else"
}

// walk checks the file's keys against the schema: unknown keys, duplicate
// keys and values of the wrong shape are errors with their line. It
// records the line of every key it sees.
func (p *parser) walk(sec *section, n *yaml.Node) {
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		p.fail(n.Line, sec.key, ErrInvalid, "want a mapping of keys (%s), got %s", strings.Join(sec.order, ", "), kindName(n))
		return
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		name := k.Value
		full := displayKey(sec.key, name)
		if k.Kind != yaml.ScalarNode {
			p.fail(k.Line, sec.key, ErrUnknownKey, "a key must be a name, not %s", kindName(k))
			continue
		}
		if first, dup := seen[name]; dup {
			p.report(k.Line, full, ErrInvalid, "duplicate key (first set at line %d); remove one", first)
			// The merge reads the tree without it (viper refuses duplicates).
			n.Content = append(n.Content[:i:i], n.Content[i+2:]...)
			p.dropped = true
			i -= 2
			continue
		}
		seen[name] = k.Line
		child := sec.children[name]
		if child == nil {
			where := "known keys"
			if sec.key != "" {
				where = sec.key + " has"
			}
			p.fail(k.Line, full, ErrUnknownKey, "unknown key (%s: %s)", where, strings.Join(sec.order, ", "))
			continue
		}
		p.lines[child.key] = k.Line
		if child.leaf != nil {
			p.leafShape(child.leaf, v)
		} else {
			p.walk(child, v)
		}
	}
}

// leafShape checks that a key's value is a single value or, for list
// keys, a list of single values (or one value, a list of one).
func (p *parser) leafShape(l *leaf, n *yaml.Node) {
	n = deref(n)
	if isNull(n) {
		return
	}
	list := l.typ.Kind() == reflect.Slice
	switch {
	case n.Kind == yaml.ScalarNode:
		return
	case list && n.Kind == yaml.SequenceNode:
		for i, item := range n.Content {
			item = deref(item)
			ik := fmt.Sprintf("%s[%d]", l.key, i)
			p.lines[ik] = item.Line
			if item.Kind != yaml.ScalarNode || isNull(item) {
				p.fail(item.Line, ik, ErrInvalid, "want a single value, got %s", kindName(item))
			}
		}
	case list:
		p.fail(n.Line, l.key, ErrInvalid, "want a list, got %s", kindName(n))
	default:
		p.fail(n.Line, l.key, ErrInvalid, "want a single value, got %s", kindName(n))
	}
}

// displayKey joins a section and a key from the file, quoting a key that
// is not a plain name so the message stays one readable line.
func displayKey(prefix, name string) string {
	if !plainName(name) {
		name = strconv.Quote(name)
		if len(name) > 66 {
			name = name[:63] + `..."`
		}
	}
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func plainName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// merge layers defaults, the file and the environment with viper and
// converts every key to its Go type. A key with a problem keeps its
// default. It returns nil only when viper cannot read the file.
func (p *parser) merge(raw []byte, root *yaml.Node) *Config {
	if p.dropped {
		// The walk dropped duplicates from the tree; encode what is left.
		if b, err := yaml.Marshal(root); err == nil {
			raw = b
		}
	}
	v := viper.NewWithOptions(viper.KeyDelimiter("."), viper.EnvKeyReplacer(strings.NewReplacer(".", "_")))
	v.SetEnvPrefix(EnvPrefix)
	v.AutomaticEnv()
	v.AllowEmptyEnv(true)
	v.SetConfigType("yaml")
	def := Defaults()
	for _, l := range schema().leaves {
		v.SetDefault(l.key, l.field(&def).Interface())
	}
	if err := v.ReadConfig(bytes.NewReader(raw)); err != nil {
		// The structure was checked already; this is a value YAML itself
		// rejects (a bad tag). Its message may quote the value: say where.
		e := p.syntax(err)
		e.Msg = "a value cannot be decoded as YAML"
		p.errs = append(p.errs, e)
		return nil
	}
	cfg := new(Config)
	for _, l := range schema().leaves {
		if p.reported(l.key) {
			l.field(cfg).Set(l.field(&def))
			continue
		}
		_, fromEnv := os.LookupEnv(l.env)
		val, problem := convert(l, v.Get(l.key), fromEnv)
		if problem != "" {
			p.failKey(l.key, "%s", problem)
			l.field(cfg).Set(l.field(&def))
			continue
		}
		l.field(cfg).Set(val)
	}
	return cfg
}

// resolvePaths makes every relative path absolute against the config
// file's directory and fills the defaults that depend on other keys.
func (p *parser) resolvePaths(c *Config) {
	dir := filepath.Dir(c.File)
	abs := func(s string) string {
		if s == "" {
			return ""
		}
		if filepath.IsAbs(s) {
			return filepath.Clean(s)
		}
		return filepath.Join(dir, s)
	}
	if c.DataDir != "" {
		c.DataDir = abs(c.DataDir)
	}
	if c.Node.Name == "" {
		c.Node.Name = hostname()
	}
	if c.Objstore.FS.Dir == "" {
		c.Objstore.FS.Dir = filepath.Join(c.DataDir, "objstore")
	} else {
		c.Objstore.FS.Dir = abs(c.Objstore.FS.Dir)
	}
	in := &c.Drivers.Incus
	for _, f := range []*string{&in.ClientCert, &in.ClientKey, &in.ServerCA} {
		if *f != "" {
			*f = abs(*f)
		}
	}
	for i, s := range c.Stacks {
		if s != "" {
			c.Stacks[i] = abs(s)
		}
	}
	c.Objstore.Prefix = strings.Trim(c.Objstore.Prefix, "/")
}
