package stackfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/engenho/engenho/drivers"
	"go.yaml.in/yaml/v3"
)

// Compose secrets (issue 15): the top-level `secrets:` defines where each
// secret's value comes from (a file in the project directory, or a
// variable of the apply environment); a service's `secrets:` names the
// ones its instances read, as files (/run/secrets/NAME in a container,
// $ENGENHO_SECRETS_DIR/NAME for a process). A value is an EnvValue marked
// secret: never shown, sealed in the journal, digested in revisions
// (SEC-2).

// MaxSecretBytes bounds one secret's value (Docker's own limit is 500 KB).
const MaxSecretBytes = 512 << 10

// SecretsDir is where a container reads its secrets (Compose's place).
const SecretsDir = "/run/secrets"

// DefaultSecretMode is a secret file's mode when the file does not say.
const DefaultSecretMode = 0o400

// What a service does when one of its secrets changes value
// (x-engenho.secrets.on_change).
const (
	// OnChangeRestart (the default): the secret's digest is in the
	// revision, so a new value rolls the service through update_config.
	OnChangeRestart = "restart"
	// OnChangeNone: the new value is recorded and reaches instances that
	// start after it; running ones keep the old one (status: stale).
	OnChangeNone = "none"
)

// SecretsPolicy is x-engenho.secrets.
type SecretsPolicy struct {
	// OnChange is OnChangeRestart or OnChangeNone; "" (a record written
	// before it existed) means OnChangeRestart.
	OnChange string `json:"on_change"`
}

// Restarts reports whether a changed secret value rolls the service.
func (p SecretsPolicy) Restarts() bool { return p.OnChange != OnChangeNone }

// ServiceSecret is one secret a service's instances read as a file.
type ServiceSecret struct {
	// Source is the secret's name in the top-level secrets.
	Source string `json:"source"`
	// Target is the file's name in the secrets directory.
	Target string `json:"target"`
	// Mode is the file's mode (default 0400); `engenho config` shows it
	// in octal.
	Mode FileMode `json:"mode"`
	// File is the absolute path the value was read from (a `file:`
	// secret); empty for an `environment:` one. The daemon watches it
	// (rotation).
	File string `json:"file,omitempty"`
	// Environment is the variable an `environment:` secret was read from.
	Environment string `json:"environment,omitempty"`
	// Value is the secret; never shown, sealed in the journal.
	Value EnvValue `json:"value" render:"-"`
}

// FileMode is a file's permission bits: a number in JSON, octal text
// ("0440") where a stack is rendered for people.
type FileMode uint32

// String is the mode in octal, as a stack file writes it.
func (m FileMode) String() string { return fmt.Sprintf("0%o", uint32(m)) }

// SecretFileLabel is the label a secret file's value is sealed and
// digested under (drivers.Sealer): its source's name.
func SecretFileLabel(source string) string { return "secret:" + source }

// Digest is the node key's digest of the value once the stack is bound
// (BindSecrets): what a revision and status may show of it; "" unbound.
func (s ServiceSecret) Digest() string { return s.Value.digest }

// secretDef is one top-level secret as read.
type secretDef struct {
	name        string
	file        string // absolute
	environment string
	value       EnvValue
	ok          bool
	node        *yaml.Node
}

var (
	secretDefKeys     = []string{"file", "environment", "name", "labels", "external", "content", "driver", "driver_opts", "template_driver"}
	serviceSecretKeys = []string{"source", "target", "uid", "gid", "mode"}
	secretsPolicyKeys = []string{"on_change"}
)

// readSecretDefs reads the top-level `secrets:`.
func (w *walker) readSecretDefs(n *yaml.Node, p string) map[string]*secretDef {
	entries, ok := w.mapping(n, p)
	if !ok {
		return nil
	}
	defs := map[string]*secretDef{}
	for _, e := range entries {
		if !validSecretName(e.key) {
			w.problem(e.kn, e.path, ErrValue, "%s", secretNameProblem(e.key))
			continue
		}
		w.at(e.kn, e.path)
		defs[e.key] = w.secretDef(e)
	}
	return defs
}

func (w *walker) secretDef(e entry) *secretDef {
	d := &secretDef{name: e.key, node: e.kn}
	entries, ok := w.mapping(e.vn, e.path)
	if !ok {
		return d
	}
	var file, env *entry
	good := true
	for i, f := range entries {
		switch f.key {
		case "file":
			file = &entries[i]
		case "environment":
			env = &entries[i]
		case "name", "labels":
			w.warn(f.kn, f.path, "ignored: engenho keeps no secret store where a secret would carry a %s", f.key)
		case "external":
			if ext, ok := w.boolean(f.vn, f.path); ok && ext {
				w.problem(f.kn, f.path, ErrValue, "external secrets live in a Docker or Swarm store engenho does not have: give file: or environment:")
				good = false
			}
		case "content":
			w.problem(f.kn, f.path, ErrValue, "a secret's content would sit in the stack file in plaintext: give file: or environment:")
			good = false
		case "driver", "driver_opts", "template_driver":
			w.problem(f.kn, f.path, ErrValue, "secret drivers are Swarm's: give file: or environment:")
			good = false
		default:
			if !isExtension(f.key) {
				w.unknownKey(f, secretDefKeys)
				good = false
			}
		}
	}
	switch {
	case file != nil && env != nil:
		w.problem(env.kn, env.path, ErrValue, "a secret has one source: file (line %d) or environment, not both", file.kn.Line)
	case file != nil:
		d.ok = w.secretFile(d, *file) && good
	case env != nil:
		d.ok = w.secretEnvironment(d, *env) && good
	case good:
		w.problem(e.kn, e.path, ErrMissing, "a secret needs file: PATH or environment: VAR")
	}
	return d
}

// secretFile reads a `file:` secret's value (bounded) at parse time.
func (w *walker) secretFile(d *secretDef, e entry) bool {
	file, ok := w.str(e.vn, e.path)
	if !ok || !w.envFilePathOK(e.vn, e.path, file) {
		return false
	}
	full := file
	if !filepath.IsAbs(full) {
		full = filepath.Join(w.dir, file)
	}
	full = filepath.Clean(full)
	value, err := readSecretFile(full)
	if err != nil {
		w.problem(e.vn, e.path, ErrValue, "%s: %s", full, secretFileProblem(err))
		return false
	}
	d.file, d.value = full, Secret(value)
	return true
}

var errSecretFile = errors.New("secret file")

func readSecretFile(path string) (string, error) {
	data, err := readRegularFile(path, MaxSecretBytes, errSecretFile)
	return string(data), err
}

// ReadSecretFile reads the file of a `file:` secret as Parse does (the
// daemon's rotation watch re-reads it). Errors never hold the content.
func ReadSecretFile(path string) (string, error) { return readSecretFile(path) }

func secretFileProblem(err error) string {
	var (
		pe *fs.PathError
		fe *fileError
	)
	switch {
	case errors.As(err, &fe):
		return fe.msg
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist"
	case errors.Is(err, fs.ErrPermission):
		return "cannot be read: permission denied"
	case errors.As(err, &pe):
		return "cannot be read: " + pe.Err.Error()
	}
	return "cannot be read"
}

// secretEnvironment takes an `environment:` secret's value from the apply
// environment (then .env). Unset is an error: a secret silently empty
// would be worse than none.
func (w *walker) secretEnvironment(d *secretDef, e entry) bool {
	name, ok := w.str(e.vn, e.path)
	if !ok {
		return false
	}
	if !validEnvName(name) {
		w.problem(e.vn, e.path, ErrValue, "%s", envNameProblem(name))
		return false
	}
	v, set := w.lookup(name)
	if !set {
		w.problem(e.vn, e.path, ErrValue, "%s is not set in the apply environment or .env", name)
		return false
	}
	if len(v) > MaxSecretBytes {
		w.problem(e.vn, e.path, ErrValue, "%s is larger than %d bytes", name, MaxSecretBytes)
		return false
	}
	d.environment, d.value = name, Secret(v)
	return true
}

// serviceSecrets reads a service's `secrets:`, short (- NAME) and long
// ({source, target, uid, gid, mode}) syntax, against the top-level ones.
func (w *walker) serviceSecrets(n *yaml.Node, p string, defs map[string]*secretDef) []ServiceSecret {
	items, ok := w.sequence(n, p)
	if !ok {
		return nil
	}
	var out []ServiceSecret
	targets := map[string]int{} // target -> line
	for i, item := range items {
		ip := index(p, i)
		s, node, ok := w.serviceSecret(item, ip)
		if !ok {
			continue
		}
		d, defined := defs[s.Source]
		if !defined {
			w.problem(node, ip, ErrValue, "secret %s is not defined in the top-level secrets%s", quote(s.Source), definedSecrets(defs))
			continue
		}
		if line, dup := targets[s.Target]; dup {
			w.problem(node, ip, ErrValue, "target %s is given twice (first at line %d)", quote(s.Target), line)
			continue
		}
		targets[s.Target] = node.Line
		if !d.ok {
			continue // its definition has the problem
		}
		s.File, s.Environment, s.Value = d.file, d.environment, d.value
		out = append(out, s)
	}
	return out
}

func definedSecrets(defs map[string]*secretDef) string {
	if len(defs) == 0 {
		return " (there are none)"
	}
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	sort.Strings(names)
	return " (defined: " + strings.Join(names, ", ") + ")"
}

// serviceSecret reads one item; node is where to report about it.
func (w *walker) serviceSecret(item *yaml.Node, p string) (ServiceSecret, *yaml.Node, bool) {
	r := w.resolve(item, p)
	if r == nil {
		return ServiceSecret{}, nil, false
	}
	w.at(r, p)
	s := ServiceSecret{Mode: DefaultSecretMode}
	if r.Kind == yaml.ScalarNode {
		name, ok := w.str(r, p)
		if !ok {
			return s, r, false
		}
		if name == "" {
			w.problem(r, p, ErrValue, "empty secret name")
			return s, r, false
		}
		s.Source, s.Target = name, name
		return s, r, true
	}
	entries, ok := w.mapping(r, p)
	if !ok {
		return s, r, false
	}
	good := true
	for _, e := range entries {
		switch e.key {
		case "source":
			s.Source, ok = w.str(e.vn, e.path)
			good = good && ok
		case "target":
			var t string
			if t, ok = w.str(e.vn, e.path); ok {
				t, ok = w.secretTarget(e.vn, e.path, t)
			}
			s.Target, good = t, good && ok
		case "uid", "gid":
			w.warn(e.kn, e.path, "ignored: a secret file belongs to the service's user")
		case "mode":
			m, ok := w.fileMode(e.vn, e.path)
			s.Mode, good = m, good && ok
		default:
			if !isExtension(e.key) {
				w.unknownKey(e, serviceSecretKeys)
				good = false
			}
		}
	}
	if s.Source == "" {
		if good {
			w.problem(r, join(p, "source"), ErrMissing, "required")
		}
		return s, r, false
	}
	if s.Target == "" {
		s.Target = s.Source
	}
	return s, r, good
}

// secretTarget: a relative target is a file name in the secrets
// directory; an absolute one must be /run/secrets/NAME. engenho puts no
// secret anywhere else (a process has no /run/secrets of its own; a file
// elsewhere would need a mount the driver may not have).
func (w *walker) secretTarget(n *yaml.Node, p, t string) (string, bool) {
	name := t
	if path.IsAbs(t) {
		dir, base := path.Split(path.Clean(t))
		if path.Clean(dir) != SecretsDir {
			w.problem(n, p, ErrValue, "secrets are files in %s: write a file name or %s/NAME", SecretsDir, SecretsDir)
			return "", false
		}
		name = base
	}
	if !validSecretName(name) {
		w.problem(n, p, ErrValue, "%s", secretNameProblem(name))
		return "", false
	}
	return name, true
}

// fileMode reads a Compose file mode: an octal number as written (0440,
// 0o440, or "0440"), a decimal one without a leading 0 (288).
func (w *walker) fileMode(n *yaml.Node, p string) (FileMode, bool) {
	r := w.scalar(n, p, "a file mode such as 0440")
	if r == nil {
		return 0, false
	}
	s := strings.TrimPrefix(strings.TrimPrefix(r.Value, "0o"), "0O")
	base := 10
	if s != r.Value || (len(s) > 1 && s[0] == '0') {
		base = 8
	}
	m, err := strconv.ParseUint(s, base, 32)
	if err != nil || m > 0o777 {
		w.problem(r, p, ErrValue, "want a file mode from 0 to 0777 (such as 0440)")
		return 0, false
	}
	if m == 0 {
		// A driver reads 0 as "the default" (drivers.SecretFile.Mode).
		w.problem(r, p, ErrValue, "mode 0 leaves the file unreadable by its owner: give one such as 0400")
		return 0, false
	}
	return FileMode(m), true
}

// secretsPolicy reads x-engenho.secrets.
func (w *walker) secretsPolicy(n *yaml.Node, p string) SecretsPolicy {
	out := SecretsPolicy{OnChange: OnChangeRestart}
	entries, _ := w.mapping(n, p)
	for _, e := range entries {
		switch e.key {
		case "on_change":
			s, ok := w.str(e.vn, e.path)
			if !ok {
				continue
			}
			if s != OnChangeRestart && s != OnChangeNone {
				w.problem(e.vn, e.path, ErrValue, "want restart or none, got %s", quote(s))
				continue
			}
			out.OnChange = s
		default:
			w.unknownKey(e, secretsPolicyKeys)
		}
	}
	return out
}

// validSecretName: a name that is also a file name (it is the default
// target), drivers.ValidSecretFileName.
func validSecretName(s string) bool { return drivers.ValidSecretFileName(s) }

func secretNameProblem(s string) string {
	switch {
	case s == "":
		return "empty secret name"
	case len(s) > 255:
		return fmt.Sprintf("a secret's file name is at most 255 bytes, this one has %d", len(s))
	case s == "." || s == "..":
		return "a secret's file name cannot be . or .."
	}
	return "a secret's file name cannot hold / or a control character"
}

// Secret values in the journal, revisions, plans and output.

func cloneSecrets(in []ServiceSecret) []ServiceSecret {
	if in == nil {
		return nil
	}
	return append([]ServiceSecret(nil), in...)
}

func sealSecrets(in []ServiceSecret, key NodeKey) ([]ServiceSecret, error) {
	out := cloneSecrets(in)
	for i, s := range out {
		v := s.Value
		v.encoding = encodeSealed
		v, err := v.sealWith(key, SecretFileLabel(s.Source))
		if err != nil {
			return nil, fmt.Errorf("secret %s: %w", s.Source, err)
		}
		out[i].Value = v
	}
	return out, nil
}

func openSecrets(in []ServiceSecret, key NodeKey) error {
	for i, s := range in {
		v, err := s.Value.openWith(key, SecretFileLabel(s.Source))
		if err != nil {
			return fmt.Errorf("secret %s: %w", s.Source, err)
		}
		v.secret = true
		in[i].Value = v
	}
	return bindSecrets(in, key)
}

func bindSecrets(in []ServiceSecret, key NodeKey) error {
	for i, s := range in {
		v, err := s.Value.bindWith(key, SecretFileLabel(s.Source))
		if err != nil {
			return fmt.Errorf("secret %s: %w", s.Source, err)
		}
		in[i].Value = v
	}
	return nil
}

func encodeSecrets(in []ServiceSecret, enc secretEncoding) []ServiceSecret {
	out := cloneSecrets(in)
	for i := range out {
		out[i].Value.encoding = enc
	}
	return out
}

func redactSecrets(in []ServiceSecret) []ServiceSecret {
	out := cloneSecrets(in)
	for i := range out {
		out[i].Value = EnvValue{secret: true, redacted: true}
	}
	return out
}

func secretValues(in []ServiceSecret) []string {
	var out []string
	for _, s := range in {
		if s.Value.value != "" {
			out = append(out, s.Value.value)
		}
	}
	return out
}

// revisionSecret is what a revision hashes of one secret file: where it
// is and how, and (on_change restart) the value's keyed digest.
type revisionSecret struct {
	Target string   `json:"target"`
	Mode   FileMode `json:"mode"`
	Value  string   `json:"value,omitempty"`
}

func revisionSecrets(in []ServiceSecret, policy SecretsPolicy) []revisionSecret {
	if len(in) == 0 {
		return nil
	}
	out := make([]revisionSecret, 0, len(in))
	for _, s := range in {
		r := revisionSecret{Target: s.Target, Mode: s.Mode}
		if policy.Restarts() {
			r.Value = s.Value.revisionValue()
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Target < out[j].Target })
	return out
}

// specSecrets is the driver's form of a service's secrets.
func specSecrets(in []ServiceSecret) []drivers.SecretFile {
	if len(in) == 0 {
		return nil
	}
	out := make([]drivers.SecretFile, 0, len(in))
	for _, s := range in {
		out = append(out, drivers.SecretFile{Name: s.Target, Value: s.Value.value, Mode: uint32(s.Mode)})
	}
	return out
}

// secrets checks a service's secrets as values (a journal record).
func (c *checker) secrets(key string, svc Service) {
	seen := map[string]bool{}
	for i, s := range svc.Secrets {
		p := index(key+".secrets", i)
		switch {
		case !validSecretName(s.Source):
			c.add(p+".source", ErrValue, "%s", secretNameProblem(s.Source))
		case !validSecretName(s.Target):
			c.add(p+".target", ErrValue, "%s", secretNameProblem(s.Target))
		case seen[s.Target]:
			c.add(p+".target", ErrValue, "target %s is given twice", quote(s.Target))
		case s.Mode > 0o777:
			c.add(p+".mode", ErrValue, "want a file mode from 0 to 0777")
		}
		seen[s.Target] = true
	}
	switch svc.Engenho.Secrets.OnChange {
	case "", OnChangeRestart, OnChangeNone:
	default:
		c.add(key+".x-engenho.secrets.on_change", ErrValue, "want restart or none")
	}
}

// flattenSecrets maps each secret file of a service's JSON to the key
// secrets.TARGET, its whole item (the value as its digest) as the leaf: a
// plan names the secret that changed, never its value.
func flattenSecrets(out map[string]string, items []any) {
	for i, item := range items {
		key := index("secrets", i)
		if m, ok := item.(map[string]any); ok {
			if t, ok := m["target"].(string); ok {
				key = join("secrets", t)
			}
		}
		b, _ := json.Marshal(item)
		out[key] = string(b)
	}
}

// eachSecrets calls fn on every service's secrets, in place.
func (st *Stack) eachSecrets(fn func([]ServiceSecret) error) error {
	for name, svc := range st.Services {
		if err := fn(svc.Secrets); err != nil {
			return fmt.Errorf("service %s: %w", name, err)
		}
	}
	return nil
}
