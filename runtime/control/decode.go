package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// decoded is a request ready to run.
type decoded struct {
	req  Request
	spec *opSpec
	args any
}

// envelopeFields are the keys a request line may have.
var envelopeFields = []string{"id", "op", "args"}

func decode(line []byte) (decoded, *Error) {
	var d decoded
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return d, Errorf(CodeBadRequest, "a request is a JSON object on one line: {\"id\": 1, \"op\": \"status\"}")
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(line, &env); err != nil {
		return d, jsonError("request", err)
	}
	// The id first, so every later error can be answered to it.
	id, idErr := decodeID(env["id"])
	d.req.ID = id
	if idErr != nil {
		return d, idErr
	}
	if err := unknownKeys("", env, envelopeFields); err != nil {
		return d, err
	}
	op, err := decodeOp(env["op"])
	if err != nil {
		return d, err
	}
	d.req.Op = op
	spec, ok := ops[op]
	if !ok {
		return d, Errorf(CodeUnknownOp, "unknown op %s (known: %s)", quote(string(op)), strings.Join(opNames(), ", "))
	}
	d.spec = spec
	raw := env["args"]
	if isNull(raw) {
		raw = nil
	}
	d.req.Args = raw
	args, aerr := spec.decode(raw)
	if aerr != nil {
		return d, aerr
	}
	d.args = args
	return d, nil
}

func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func decodeID(raw json.RawMessage) (uint64, *Error) {
	if isNull(raw) {
		return 0, Errorf(CodeBadRequest, "id: required (a positive integer the answer will carry)")
	}
	id, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil || id == 0 {
		return 0, Errorf(CodeBadRequest, "id: want a positive integer, got %s", quote(string(raw)))
	}
	return id, nil
}

func decodeOp(raw json.RawMessage) (Op, *Error) {
	if isNull(raw) {
		return "", Errorf(CodeBadRequest, "op: required")
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", Errorf(CodeBadRequest, "op: want a string, got %s", jsonKind(raw))
	}
	if s == "" {
		return "", Errorf(CodeBadRequest, "op: required")
	}
	return Op(s), nil
}

// decodeArgs decodes raw (nil: no args) into a new A and validates it.
// Unknown keys are refused, matched exactly against the JSON tags.
func decodeArgs[A validator](raw json.RawMessage) (any, *Error) {
	var a A
	if raw != nil {
		if err := checkKnownFields(raw, reflect.TypeOf(a), "args"); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, jsonError("args", err)
		}
	}
	if err := a.validate(); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return nil, e
		}
		return nil, Errorf(CodeBadRequest, "args: %v", err)
	}
	return a, nil
}

// checkKnownFields refuses keys of raw (a JSON object for struct t) that no
// field of t has, recursing into slices of structs.
func checkKnownFields(raw json.RawMessage, t reflect.Type, path string) *Error {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return Errorf(CodeBadRequest, "%s: want an object, got %s", path, jsonKind(raw))
	}
	fields := jsonFields(t)
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	if err := unknownKeys(path, obj, names); err != nil {
		return err
	}
	for key, val := range obj {
		ft := fields[key]
		if ft.Kind() != reflect.Slice || ft.Elem().Kind() != reflect.Struct || isNull(val) {
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(val, &items); err != nil {
			return Errorf(CodeBadRequest, "%s.%s: want an array, got %s", path, key, jsonKind(val))
		}
		for i, item := range items {
			if err := checkKnownFields(item, ft.Elem(), fmt.Sprintf("%s.%s[%d]", path, key, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func unknownKeys(path string, obj map[string]json.RawMessage, known []string) *Error {
	var unknown []string
	for k := range obj {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	where := "request"
	if path != "" {
		where = path
	}
	sorted := slices.Clone(known)
	slices.Sort(sorted)
	return Errorf(CodeBadRequest, "%s: unknown field %s (known: %s)", where, quote(unknown[0]), strings.Join(sorted, ", "))
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

// jsonFields maps a struct's JSON keys to their field types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	if v, ok := fieldCache.Load(t); ok {
		return v.(map[string]reflect.Type)
	}
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	fieldCache.Store(t, out)
	return out
}

// jsonError turns a decoding error into a bad_request that says where.
func jsonError(where string, err error) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return Errorf(CodeBadRequest, "%s: not valid JSON at byte %d: %v", where, syn.Offset, syn)
	case errors.As(err, &typ):
		field := where
		if typ.Field != "" {
			field = where + "." + typ.Field
		}
		return &Error{Code: CodeBadRequest, Message: fmt.Sprintf("%s: want %s, got %s", field, goKind(typ.Type), typ.Value), Details: map[string]string{"field": field}}
	}
	return Errorf(CodeBadRequest, "%s: %v", where, err)
}

// goKind names a Go type the way a JSON user thinks of it.
func goKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}

// jsonKind names the kind of a raw JSON value.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
