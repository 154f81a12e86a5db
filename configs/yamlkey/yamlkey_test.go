package yamlkey

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// SVC-1, DMN-15, SEC-3: a key over the YAML library's limit is found on
// its line, in a block or a flow mapping, plain or quoted, and only such
// a key: each case is checked against the library itself, which refuses
// exactly the keys Long finds (it counts characters, not bytes, and a
// quoted key's quotes).
func TestLongSVC1DMN15SEC3(t *testing.T) {
	over, atMax := strings.Repeat("k", Max+1), strings.Repeat("k", Max)
	cases := []struct {
		name       string
		yaml       string
		line, size int
	}{
		{"plain key", "a: 1\n" + over + ": 1\n", 2, Max + 1},
		{"key at the end of its line", "a:\n  " + over + ":\n    b: 1\n", 2, Max + 1},
		{"quoted key", `"` + over + `": 1`, 1, Max + 3},
		{"quoted key whose quotes take it over", `"` + strings.Repeat("k", Max-1) + `": 1`, 1, Max + 1},
		{"key in a flow mapping", "a: {b: 1, " + over + ": 2}", 1, Max + 1},
		{"key of exactly Max", atMax + ": 1", 0, 0},
		{"key of Max two-byte characters", strings.Repeat("é", Max) + ": 1", 0, 0},
		{"long value", "a: " + over, 0, 0},
		{"short file", "a: 1", 0, 0},
	}
	for _, tc := range cases {
		line, size, ok := Long([]byte(tc.yaml))
		if line != tc.line || size != tc.size || ok != (tc.line > 0) {
			t.Errorf("%s: Long = %d, %d, %v; want %d, %d", tc.name, line, size, ok, tc.line, tc.size)
		}
		var v any
		if err := yaml.Unmarshal([]byte(tc.yaml), &v); (err != nil) != ok {
			t.Errorf("%s: the YAML library says %v, Long says long=%v", tc.name, err, ok)
		}
	}
}
