package daemonconfig

import (
	"testing"

	"github.com/rs/zerolog"
)

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]zerolog.Level{"debug": zerolog.DebugLevel, "WARN": zerolog.WarnLevel, "": zerolog.InfoLevel} {
		got, err := ParseLevel(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Fatal("bad level accepted")
	}
}
