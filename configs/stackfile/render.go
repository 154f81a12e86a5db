package stackfile

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Rendering is what `engenho config` prints: the stack as engenho will
// run it, interpolated and with every default applied, in the stack
// file's own key names. Durations are written as in a file (10s, 1m0s),
// secret values as Redaction, services in file order.

// RenderYAML renders st as YAML.
func RenderYAML(st *Stack) ([]byte, error) {
	return yaml.Marshal(renderNode(st))
}

// RenderJSON renders st as indented JSON (object keys sorted).
func RenderJSON(st *Stack) ([]byte, error) {
	var v any
	if err := renderNode(st).Decode(&v); err != nil {
		return nil, fmt.Errorf("render %s: %w", st.Name, err)
	}
	return json.MarshalIndent(v, "", "  ")
}

func renderNode(st *Stack) *yaml.Node {
	services := yamlMap()
	for _, name := range st.Order {
		svc := renderValue(reflect.ValueOf(st.Services[name]))
		dropKey(svc, "name") // its name is its key
		addKey(services, name, svc)
	}
	root := yamlMap()
	addKey(root, "name", yamlScalar(st.Name, "!!str"))
	addKey(root, "services", services)
	if len(st.Volumes) > 0 {
		addKey(root, "volumes", renderValue(reflect.ValueOf(st.Volumes)))
	}
	return root
}

var (
	durationType = reflect.TypeFor[time.Duration]()
	envValueType = reflect.TypeFor[EnvValue]()
	fileModeType = reflect.TypeFor[FileMode]()
)

// renderValue converts v by its JSON field names; nil when the value is
// left out (a zero omitempty field, a nil pointer).
func renderValue(v reflect.Value) *yaml.Node {
	switch {
	case v.Type() == durationType:
		return yamlScalar(time.Duration(v.Int()).String(), "!!str")
	case v.Type() == envValueType:
		return yamlScalar(v.Interface().(EnvValue).String(), "!!str")
	case v.Type() == fileModeType:
		return yamlScalar(v.Interface().(FileMode).String(), "!!str")
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return renderValue(v.Elem())
	case reflect.Struct:
		return renderStruct(v)
	case reflect.Map:
		return renderMap(v)
	case reflect.Slice, reflect.Array:
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for i := range v.Len() {
			if n := renderValue(v.Index(i)); n != nil {
				seq.Content = append(seq.Content, n)
			}
		}
		return seq
	case reflect.String:
		return yamlScalar(v.String(), "!!str")
	case reflect.Bool:
		return yamlScalar(strconv.FormatBool(v.Bool()), "!!bool")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return yamlScalar(strconv.FormatInt(v.Int(), 10), "!!int")
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return yamlScalar(strconv.FormatUint(v.Uint(), 10), "!!int")
	case reflect.Float32, reflect.Float64:
		return yamlScalar(strconv.FormatFloat(v.Float(), 'g', -1, 64), "!!float")
	}
	return yamlScalar(fmt.Sprint(v.Interface()), "!!str")
}

func renderStruct(v reflect.Value) *yaml.Node {
	out := yamlMap()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if !f.IsExported() || tag == "-" || f.Tag.Get("render") == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = f.Name
		}
		fv := v.Field(i)
		if strings.Contains(opts, "omitempty") && fv.IsZero() {
			continue
		}
		if n := renderValue(fv); n != nil {
			addKey(out, name, n)
		}
	}
	return out
}

func renderMap(v reflect.Value) *yaml.Node {
	keys := make([]string, 0, v.Len())
	byKey := map[string]reflect.Value{}
	for _, k := range v.MapKeys() {
		s := fmt.Sprint(k.Interface())
		keys = append(keys, s)
		byKey[s] = v.MapIndex(k)
	}
	sort.Strings(keys)
	out := yamlMap()
	for _, k := range keys {
		if n := renderValue(byKey[k]); n != nil {
			addKey(out, k, n)
		}
	}
	return out
}

// dropKey removes key and its value from mapping m.
func dropKey(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return
		}
	}
}

func yamlMap() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode} }

func yamlScalar(v, tag string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Value: v, Tag: tag}
}

func addKey(m *yaml.Node, key string, v *yaml.Node) {
	m.Content = append(m.Content, yamlScalar(key, "!!str"), v)
}
