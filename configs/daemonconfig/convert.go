package daemonconfig

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/engenho/engenho/drivers"
)

// convert turns the value viper found for l (a default of the Go type, a
// YAML value, or an environment string) into l's type. A problem is
// returned as a message that quotes the value only when l is not a secret.
func convert(l leaf, v any, fromEnv bool) (reflect.Value, string) {
	show := func(x any) string {
		if l.secret() {
			return "(value hidden)"
		}
		return quote(fmt.Sprint(x))
	}
	if v != nil && reflect.TypeOf(v) == l.typ {
		// A default, already of the key's type.
		if l.typ.Kind() == reflect.Slice {
			if reflect.ValueOf(v).Len() == 0 {
				return reflect.Zero(l.typ), ""
			}
			c := reflect.MakeSlice(l.typ, reflect.ValueOf(v).Len(), reflect.ValueOf(v).Len())
			reflect.Copy(c, reflect.ValueOf(v))
			return c, ""
		}
		return reflect.ValueOf(v), ""
	}
	switch l.typ {
	case secretType:
		s, ok := scalarString(v)
		if !ok {
			return reflect.Value{}, "want a string"
		}
		return reflect.ValueOf(drivers.Secret(s)), ""
	case durationType:
		d, problem := toDuration(v, show)
		return reflect.ValueOf(d), problem
	case sizeType:
		n, problem := toSize(v, show)
		return reflect.ValueOf(n), problem
	case stringsType:
		ss, problem := toStrings(v, fromEnv, show)
		return reflect.ValueOf(ss), problem
	case durationsTyp:
		return toDurations(v, fromEnv, show)
	}
	switch l.typ.Kind() {
	case reflect.String:
		s, ok := scalarString(v)
		if !ok {
			return reflect.Value{}, "want a string"
		}
		return reflect.ValueOf(s).Convert(l.typ), ""
	case reflect.Bool:
		switch x := v.(type) {
		case bool:
			return reflect.ValueOf(x), ""
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(x))
			if err != nil {
				return reflect.Value{}, "want true or false, got " + show(x)
			}
			return reflect.ValueOf(b), ""
		}
		return reflect.Value{}, "want true or false, got " + show(v)
	case reflect.Int:
		n, ok := toInt(v)
		if !ok {
			return reflect.Value{}, "want a whole number, got " + show(v)
		}
		return reflect.ValueOf(n), ""
	case reflect.Float64:
		switch x := v.(type) {
		case float64:
			return reflect.ValueOf(x), ""
		case int:
			return reflect.ValueOf(float64(x)), ""
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return reflect.ValueOf(f), ""
			}
		}
		return reflect.Value{}, "want a number, got " + show(v)
	}
	panic("config: no converter for " + l.typ.String())
}

// quote renders a value for a message: Go-quoted, and cut short with its
// length when long, so a 10k-character value gives a readable line.
func quote(s string) string {
	if len(s) <= 64 {
		return strconv.Quote(s)
	}
	cut := 61
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s (%d characters)", strconv.Quote(s[:cut]+"..."), len(s))
}

// quotePath quotes a path whole unless it is longer than a path can be.
func quotePath(s string) string {
	if len(s) <= 4096 {
		return strconv.Quote(s)
	}
	return quote(s)
}

// scalarString accepts a string, or a number or bool YAML typed as one
// (`group: 1000`).
func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case nil:
		return "", true
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(x), true
	}
	return "", false
}

func toInt(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		if x >= math.MinInt && x <= math.MaxInt {
			return int(x), true
		}
	case uint64:
		if x <= math.MaxInt {
			return int(x), true
		}
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int(x), true
		}
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(x))
		return n, err == nil
	}
	return 0, false
}

func toDuration(v any, show func(any) string) (time.Duration, string) {
	switch x := v.(type) {
	case time.Duration:
		return x, ""
	case int:
		if x == 0 {
			return 0, ""
		}
		return 0, durationWant + ", got " + show(v) + ": a number needs a unit"
	case float64:
		return 0, durationWant + ", got " + show(v) + ": a number needs a unit"
	case string:
		return parseDuration(x, show)
	}
	return 0, durationWant + ", got " + show(v)
}

func toSize(v any, show func(any) string) (Size, string) {
	switch x := v.(type) {
	case Size:
		return x, ""
	case int:
		if x >= 0 {
			return Size(x), ""
		}
	case uint64:
		if x <= math.MaxInt64 {
			return Size(x), ""
		}
	case string:
		n, err := ParseSize(x)
		if err == nil {
			return n, ""
		}
		return 0, err.Error() + ", got " + show(v)
	}
	return 0, "want a byte count such as 1048576 or 10MiB, got " + show(v)
}

// items splits a list value: a YAML list, one YAML value (a list of one),
// or an environment string of comma-separated items.
func items(v any, fromEnv bool) ([]any, bool) {
	switch x := v.(type) {
	case nil:
		return nil, true
	case []any:
		return x, true
	case string:
		if !fromEnv {
			return []any{x}, true
		}
		var out []any
		for _, s := range strings.Split(x, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out, true
	case int, int64, uint64, float64, bool:
		return []any{x}, true
	}
	return nil, false
}

func toStrings(v any, fromEnv bool, show func(any) string) ([]string, string) {
	if ss, ok := v.([]string); ok {
		return append([]string(nil), ss...), ""
	}
	list, ok := items(v, fromEnv)
	if !ok {
		return nil, "want a list of strings"
	}
	out := make([]string, 0, len(list))
	for i, it := range list {
		s, ok := scalarString(it)
		if !ok {
			return nil, fmt.Sprintf("item %d: want a string, got %s", i, show(it))
		}
		out = append(out, s)
	}
	return out, ""
}

func toDurations(v any, fromEnv bool, show func(any) string) (reflect.Value, string) {
	if ds, ok := v.([]time.Duration); ok {
		return reflect.ValueOf(append([]time.Duration(nil), ds...)), ""
	}
	list, ok := items(v, fromEnv)
	if !ok {
		return reflect.Value{}, "want a list of durations"
	}
	out := make([]time.Duration, 0, len(list))
	for i, it := range list {
		d, problem := toDuration(it, show)
		if problem != "" {
			return reflect.Value{}, fmt.Sprintf("item %d: %s", i, problem)
		}
		out = append(out, d)
	}
	return reflect.ValueOf(out), ""
}
