package yamlkey

import (
	"strings"
	"testing"
)

// A key over Max is found on its line whatever quotes or flow mapping
// hold it; a long value, or a key of exactly Max, is not a long key.
func TestLong(t *testing.T) {
	long, atMax := strings.Repeat("k", Max+1), strings.Repeat("k", Max)
	cases := []struct {
		name       string
		yaml       string
		line, size int
		ok         bool
	}{
		{"plain key", "a: 1\n" + long + ": 1\n", 2, Max + 1, true},
		{"key at the end of its line", "a:\n  " + long + ":\n    b: 1\n", 2, Max + 1, true},
		{"quoted key", `"` + long + `": 1`, 1, Max + 1, true},
		{"key in a flow mapping", "a: {b: 1, " + long + ": 2}", 1, Max + 1, true},
		{"key of exactly Max", atMax + ": 1", 0, 0, false},
		{"long value", "a: " + long, 0, 0, false},
		{"long value with a colon inside", "a: x" + long + ":y", 0, 0, false},
		{"short file", "a: 1", 0, 0, false},
	}
	for _, tc := range cases {
		line, size, ok := Long([]byte(tc.yaml))
		if line != tc.line || size != tc.size || ok != tc.ok {
			t.Errorf("%s: Long = %d, %d, %v; want %d, %d, %v", tc.name, line, size, ok, tc.line, tc.size, tc.ok)
		}
	}
}
