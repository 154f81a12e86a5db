package daemonconfig

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/engenho/engenho/drivers"
)

// Reload says how a change to a key takes effect.
type Reload string

const (
	// Live keys are applied by the running daemon in place.
	Live Reload = "live"
	// Restart keys take effect at the next boot of the runtime
	// (`engenho restart`); the daemon process stays up.
	Restart Reload = "restart"
	// Relaunch keys are bound when the daemon process starts (the data
	// directory lock, the control socket, the logger's format, the metrics
	// listener): they take effect only when the process is restarted.
	Relaunch Reload = "relaunch"
)

// EnvPrefix starts every environment override.
const EnvPrefix = "ENGENHO"

// leaf is one config key with a value.
type leaf struct {
	key    string // dotted: "objstore.s3.bucket"
	env    string // ENGENHO_OBJSTORE_S3_BUCKET
	index  []int  // field index path from Config
	typ    reflect.Type
	reload Reload
}

func (l leaf) secret() bool { return l.typ == secretType }

// section is a mapping in the file: its children by key, in field order.
type section struct {
	key      string
	order    []string
	children map[string]*section
	leaf     *leaf // set for a key with a value
}

var (
	secretType   = reflect.TypeFor[drivers.Secret]()
	sizeType     = reflect.TypeFor[Size]()
	durationType = reflect.TypeFor[time.Duration]()
	durationsTyp = reflect.TypeFor[[]time.Duration]()
	stringsType  = reflect.TypeFor[[]string]()
)

type schemaT struct {
	root   *section
	leaves []leaf
	byKey  map[string]leaf
}

var schema = sync.OnceValue(buildSchema)

func buildSchema() *schemaT {
	s := &schemaT{byKey: map[string]leaf{}}
	s.root = s.build(reflect.TypeFor[Config](), "", nil, Restart)
	return s
}

func (s *schemaT) build(t reflect.Type, prefix string, index []int, reload Reload) *section {
	sec := &section{key: prefix, children: map[string]*section{}}
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("key")
		if name == "" {
			continue
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		r := reload
		if tag := f.Tag.Get("reload"); tag != "" {
			r = Reload(tag)
		}
		idx := append(append([]int(nil), index...), i)
		var child *section
		if f.Type.Kind() == reflect.Struct {
			child = s.build(f.Type, key, idx, r)
		} else {
			if !supported(f.Type) {
				panic(fmt.Sprintf("config: key %s has unsupported type %s", key, f.Type))
			}
			l := leaf{key: key, env: envName(key), index: idx, typ: f.Type, reload: r}
			s.leaves = append(s.leaves, l)
			s.byKey[key] = l
			child = &section{key: key, leaf: &l}
		}
		sec.order = append(sec.order, name)
		sec.children[name] = child
	}
	return sec
}

func supported(t reflect.Type) bool {
	switch t {
	case secretType, sizeType, durationType, durationsTyp, stringsType:
		return true
	}
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Float64:
		return true
	}
	return false
}

// envName is the environment variable that overrides key.
func envName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Keys lists every config key with its environment override and how a
// change to it takes effect, in file order (docs/config.md is checked
// against it).
func Keys() []KeyInfo {
	out := make([]KeyInfo, 0, len(schema().leaves))
	for _, l := range schema().leaves {
		out = append(out, KeyInfo{Key: l.key, Env: l.env, Reload: l.reload, Secret: l.secret()})
	}
	return out
}

// KeyInfo describes one key.
type KeyInfo struct {
	Key    string
	Env    string
	Reload Reload
	Secret bool
}

// field returns the value of l in c.
func (l leaf) field(c *Config) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(l.index)
}
