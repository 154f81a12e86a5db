package drivers

import (
	"strings"
	"sync/atomic"
	"testing"
)

func TestTailLines(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\n", 5, "a\nb\n"},
		{"a\nb\n", 0, "a\nb\n"},
		{"a\nb\nc\n", 3, "a\nb\nc\n"},
		{"a\nb\nc", 1, "c"},
		{"\n\n", 1, "\n"},
		{"", 3, ""},
	} {
		if got := string(TailLines([]byte(c.in), c.n)); got != c.want {
			t.Errorf("TailLines(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

// DRV-1: a watch fires once, and never after it was cancelled.
func TestOnceWatch(t *testing.T) {
	var n atomic.Int32
	w := NewOnceWatch(func(Exit) { n.Add(1) })
	w.Fire(Exit{})
	w.Fire(Exit{})
	if n.Load() != 1 {
		t.Fatalf("fired %d times", n.Load())
	}
	c := NewOnceWatch(func(Exit) { n.Add(1) })
	c.Cancel()
	c.Fire(Exit{})
	if n.Load() != 1 {
		t.Fatal("fired after cancel")
	}
}

// DRV-1, DRV-2: List's selector matches a subset of the labels; a label that is
// missing reads as "" (incus drops keys set to ""), so every driver
// answers the same.
func TestLabelsMatch(t *testing.T) {
	l := Labels{"engenho.stack": "web", "tier": "front"}
	cases := []struct {
		sel  Labels
		want bool
	}{
		{nil, true},
		{Labels{}, true},
		{Labels{"engenho.stack": "web"}, true},
		{Labels{"engenho.stack": "web", "tier": "front"}, true},
		{Labels{"engenho.stack": "api"}, false},
		{Labels{"engenho.stack": "web", "tier": "back"}, false},
		{Labels{"absent": ""}, true},
		{Labels{"absent": "x"}, false},
	}
	for _, c := range cases {
		if got := l.Match(c.sel); got != c.want {
			t.Errorf("%v.Match(%v) = %v, want %v", l, c.sel, got, c.want)
		}
	}
	if !Labels(nil).Match(Labels{"k": ""}) || Labels(nil).Match(Labels{"k": "v"}) {
		t.Error("nil labels: a missing key reads as \"\"")
	}
}

// SEC-3: a secret file's name never makes a path: every driver checks
// names, uniqueness and modes with CheckSecretFiles.
func TestCheckSecretFiles(t *testing.T) {
	cases := []struct {
		files []SecretFile
		ok    bool
	}{
		{nil, true},
		{[]SecretFile{{Name: "db_password", Mode: 0o400}, {Name: "api.token"}}, true},
		{[]SecretFile{{Name: ""}}, false},
		{[]SecretFile{{Name: "."}}, false},
		{[]SecretFile{{Name: ".."}}, false},
		{[]SecretFile{{Name: "../x"}}, false},
		{[]SecretFile{{Name: "a\x00b"}}, false},
		{[]SecretFile{{Name: "a\nb"}}, false},
		{[]SecretFile{{Name: strings.Repeat("a", 256)}}, false},
		{[]SecretFile{{Name: "a"}, {Name: "a"}}, false},
		{[]SecretFile{{Name: "a", Mode: 0o4755}}, false},
	}
	for i, c := range cases {
		err := CheckSecretFiles(append(c.files, SecretFile{Name: "z", Value: "s3cr3t"}))
		if (err == nil) != c.ok || err != nil && strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("case %d: CheckSecretFiles = %v, want ok %v", i, err, c.ok)
		}
	}
}
