package stackfile

import (
	"errors"
	"io"
	"regexp"
	"strings"

	"github.com/compose-spec/compose-go/v2/template"
	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v3"
)

// Interpolation is Compose's: ${VAR}, $VAR, ${VAR:-default},
// ${VAR-default}, ${VAR:?error}, ${VAR?error}, ${VAR:+alt}, ${VAR+alt}
// and $$ for a literal $, done by compose-go's template package on every
// scalar value of the file (keys are kept as written) before any key is
// read, so typed fields (replicas, ports, healthcheck.interval) take the
// interpolated value. Values come from Options.Env and the .env file; a
// variable that is set in neither is replaced by "" with a warning.
//
// One exception: ${ENGENHO_...} and $ENGENHO_... (without a modifier) are
// engenho's own per-instance variables (ENGENHO_BIN, ENGENHO_SLOT,
// ENGENHO_DATA_DIR, ...), filled when an instance starts; interpolation
// leaves them as written.

func init() {
	// The template package logs unset variables met inside a default
	// (${A:-$B}) through logrus's standard logger; engenho logs with
	// zerolog and reports unset variables as warnings itself.
	logrus.SetOutput(io.Discard)
}

var engenhoRef = regexp.MustCompile(`^\$\{?ENGENHO_[A-Za-z0-9_]*\}?$`)

// plainRef is a reference without a modifier: $NAME or ${NAME}.
var plainRef = regexp.MustCompile(`^\$\{?([_A-Za-z][_A-Za-z0-9]*)\}?$`)

// defaultRef is ${NAME:-default} or ${NAME-default}; innerRef a plain
// reference inside the default ($NAME or ${NAME}; one with a modifier of
// its own says what it becomes unset).
var (
	defaultRef = regexp.MustCompile(`^\$\{([_A-Za-z][_A-Za-z0-9]*)(:?-)(.*)\}$`)
	innerRef   = regexp.MustCompile(`\$(?:\{([_A-Za-z][_A-Za-z0-9]*)\}|([_A-Za-z][_A-Za-z0-9]*))`)
)

// interpolate substitutes every scalar value under n in place. Aliases
// are skipped: the anchored node is substituted where it is written.
func (w *walker) interpolate(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			w.interpolate(c, path)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if isMergeKey(k) {
				w.interpolate(v, path)
				continue
			}
			w.interpolate(v, join(path, k.Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			w.interpolate(c, index(path, i))
		}
	case yaml.ScalarNode:
		w.interpolateScalar(n, path)
	}
}

func (w *walker) interpolateScalar(n *yaml.Node, path string) {
	if !strings.Contains(n.Value, "$") {
		return
	}
	var unset []string
	replace := func(sub string, m template.Mapping, cfg *template.Config) (string, error) {
		if engenhoRef.MatchString(sub) {
			return sub, nil
		}
		if ref := plainRef.FindStringSubmatch(sub); ref != nil {
			if _, ok := m(ref[1]); !ok {
				unset = append(unset, ref[1])
			}
		}
		unset = append(unset, unsetInDefault(sub, m)...)
		return template.DefaultReplacementFunc(sub, m, cfg)
	}
	out, err := template.SubstituteWithOptions(n.Value, w.lookup, template.WithoutLogging, template.WithReplacementFunction(replace))
	if err != nil {
		w.problem(n, path, ErrValue, "%s", interpolationProblem(err))
		w.uninterpolated[n] = true
		return
	}
	for _, name := range unset {
		w.warn(n, path, "variable %s is not set (in the apply environment or .env): replaced by an empty string", name)
	}
	if out == n.Value {
		return
	}
	n.Value = out
	if n.Style&yaml.TaggedStyle == 0 {
		// The value's type is what it reads as now: replicas: ${N:-2} is
		// an integer, as Compose casts typed fields after interpolating.
		n.Tag, n.Style = "", 0
		if n.ShortTag() == "!!null" {
			n.Tag = "!!str"
		}
	}
}

// unsetInDefault lists the variables a default that is used refers to and
// nothing sets: ${X:-$Y} with X and Y unset is "" as surely as $Y alone.
func unsetInDefault(sub string, m template.Mapping) []string {
	ref := defaultRef.FindStringSubmatch(sub)
	if ref == nil || !strings.Contains(ref[3], "$") {
		return nil
	}
	v, set := m(ref[1])
	if set && (ref[2] == "-" || v != "") {
		return nil // the default is not used
	}
	var out []string
	for _, inner := range innerRef.FindAllStringSubmatch(strings.ReplaceAll(ref[3], "$$", ""), -1) {
		name := inner[1] + inner[2]
		if _, ok := m(name); !ok && !strings.HasPrefix(name, "ENGENHO_") {
			out = append(out, name)
		}
	}
	return out
}

// interpolationProblem says what is wrong without quoting a value (it may
// be a secret).
func interpolationProblem(err error) string {
	var missing *template.MissingRequiredError
	if errors.As(err, &missing) {
		if missing.Reason != "" {
			return "required variable " + missing.Variable + " is not set: " + missing.Reason
		}
		return "required variable " + missing.Variable + " is not set"
	}
	var invalid *template.InvalidTemplateError
	if errors.As(err, &invalid) {
		return "invalid interpolation: write ${NAME}, ${NAME:-default}, ... or $$ for a literal $"
	}
	return "interpolation: " + err.Error()
}

// lookup is the interpolation mapping: the apply environment first, then
// the .env file, as Compose prefers the shell to .env.
func (w *walker) lookup(name string) (string, bool) {
	if v, ok := w.applyEnv[name]; ok {
		return v, true
	}
	v, ok := w.dotEnv[name]
	return v, ok
}
