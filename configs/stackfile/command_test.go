package stackfile

import (
	"reflect"
	"testing"
)

// A string command is split like a POSIX shell splits words, with no
// expansion.
func TestSplitCommand(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		bad  bool
	}{
		{in: "a b  c", want: []string{"a", "b", "c"}},
		{in: "  a\tb\n", want: []string{"a", "b"}},
		{in: `a "b c" 'd e'`, want: []string{"a", "b c", "d e"}},
		{in: `a"b"'c'd`, want: []string{"abcd"}},
		{in: `"" ''`, want: []string{"", ""}},
		{in: `a\ b \"c`, want: []string{"a b", `"c`}},
		{in: `"a \"q\" \\ \$x \n"`, want: []string{`a "q" \ $x \n`}},
		{in: `'no \escapes $here'`, want: []string{`no \escapes $here`}},
		{in: `echo $HOME ${X} *`, want: []string{"echo", "$HOME", "${X}", "*"}},
		{in: "", want: nil},
		{in: `"open`, bad: true},
		{in: `'open`, bad: true},
		{in: `end\`, bad: true},
	}
	for _, c := range cases {
		got, err := splitCommand(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%q: accepted as %q", c.in, got)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
}

func TestCheckVars(t *testing.T) {
	for s, ok := range map[string]bool{
		"${ENGENHO_BIN}":                    true,
		"a${ENGENHO_SLOT}b${ENGENHO_STACK}": true,
		"${HOME} $ENGENHO_BIN":              true, // not ours: left as written
		"${ENGENHO_DATA_DIR}":               true, // the shell's, in a hibernating instance
		"${ENGENHO_BINARY}":                 false,
		"${ENGENHO_BIN":                     false,
	} {
		if err := checkVars(s); (err == nil) != ok {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for s, want := range map[string]int64{"1": 1, "1b": 1, "2k": 2048, "2kb": 2048, "1KiB": 1024, "512m": 512 << 20, "1.5g": 3 << 29, "1 GB": 1 << 30, "1t": 1 << 40} {
		if got, err := parseBytes(s); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "m", "1x", "1.2.3m", "-1m", "1e99t"} {
		if _, err := parseBytes(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
