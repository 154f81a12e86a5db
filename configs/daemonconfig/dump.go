package daemonconfig

import (
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/engenho/engenho/drivers"
)

// Redacted returns a copy of c with every secret replaced by "[redacted]"
// (empty secrets stay empty, so the copy still says whether one is set).
// Use it for anything that leaves the process: status, events, JSON.
func (c *Config) Redacted() *Config {
	cp := c.clone()
	for _, l := range schema().leaves {
		if l.secret() {
			f := l.field(cp)
			f.Set(reflect.ValueOf(drivers.Secret(drivers.Secret(f.String()).Masked())))
		}
	}
	return cp
}

func (c *Config) clone() *Config {
	cp := *c
	for _, l := range schema().leaves {
		f := l.field(&cp)
		if f.Kind() == reflect.Slice && !f.IsNil() {
			s := reflect.MakeSlice(f.Type(), f.Len(), f.Len())
			reflect.Copy(s, f)
			f.Set(s)
		}
	}
	cp.StackFiles = append([]string(nil), c.StackFiles...)
	cp.Warnings = append([]string(nil), c.Warnings...)
	return &cp
}

// String is the effective config as YAML, secrets redacted: what
// `engenho status --config` shows and what the daemon logs at debug.
func (c *Config) String() string {
	b, err := yaml.Marshal(c.Effective())
	if err != nil {
		return "config: " + err.Error()
	}
	return string(b)
}

// Effective is the effective config as a YAML tree in file order, with
// durations and sizes written as in a file and secrets redacted.
func (c *Config) Effective() *yaml.Node {
	return dumpSection(schema().root, c)
}

func dumpSection(sec *section, c *Config) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, name := range sec.order {
		child := sec.children[name]
		var v *yaml.Node
		if child.leaf != nil {
			v = dumpLeaf(*child.leaf, c)
		} else {
			v = dumpSection(child, c)
		}
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: name}, v)
	}
	return m
}

func dumpLeaf(l leaf, c *Config) *yaml.Node {
	f := l.field(c)
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	switch l.typ {
	case secretType:
		return str(drivers.Secret(f.String()).Masked())
	case durationType:
		return plain(formatDuration(time.Duration(f.Int())))
	case sizeType:
		return plain(Size(f.Int()).String())
	case durationsTyp:
		seq := &yaml.Node{Kind: yaml.SequenceNode, Style: yaml.FlowStyle}
		for _, d := range f.Interface().([]time.Duration) {
			seq.Content = append(seq.Content, plain(formatDuration(d)))
		}
		return seq
	case stringsType:
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		ss := f.Interface().([]string)
		if len(ss) == 0 {
			seq.Style = yaml.FlowStyle
		}
		for _, s := range ss {
			seq.Content = append(seq.Content, str(s))
		}
		return seq
	}
	switch f.Kind() {
	case reflect.Bool:
		return plain(strconv.FormatBool(f.Bool()))
	case reflect.Int:
		return plain(strconv.FormatInt(f.Int(), 10))
	case reflect.Float64:
		return plain(strconv.FormatFloat(f.Float(), 'g', -1, 64))
	}
	return str(f.String())
}

// plain is a scalar written without quotes or a tag (never empty).
func plain(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }

// formatDuration drops time.Duration's zero tails: 1m0s -> 1m, 1h0m0s -> 1h.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// envWarnings names ENGENHO_* variables that look like overrides (their
// first word is a config section) but match no key: a typo there would
// otherwise be silently ignored. Variables of other ENGENHO_ uses (the
// instance environment, test helpers) do not start with a section name,
// or are harmless to mention.
func envWarnings(environ []string) []string {
	known := map[string]bool{}
	sections := map[string]bool{}
	for _, l := range schema().leaves {
		known[l.env] = true
		first, _, _ := strings.Cut(l.key, ".")
		sections[EnvPrefix+"_"+strings.ToUpper(first)] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix+"_") || known[name] {
			continue
		}
		for s := range sections {
			if strings.HasPrefix(name, s+"_") {
				out = append(out, name+" is set but is not a config override (see docs/config.md for the names)")
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
