package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// DMN-17: JSON lines off a terminal, and a level that changes at run time
// for every derived logger.
func TestDMN17JSONAndHotLevel(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, "auto", zerolog.InfoLevel)
	child := l.With().Str("actor", "root/stack:web").Logger()
	child.Debug().Msg("hidden")
	child.Info().Str("k", "v").Msg("shown")
	l.SetLevel(zerolog.DebugLevel)
	child.Debug().Msg("now shown")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if rec["actor"] != "root/stack:web" || rec["k"] != "v" || rec["message"] != "shown" {
		t.Fatalf("record %v", rec)
	}
	if !strings.Contains(lines[1], "now shown") {
		t.Fatalf("debug after SetLevel missing: %q", lines[1])
	}
}

func TestRouteSlog(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf, "json", zerolog.DebugLevel)
	old := slog.Default()
	defer slog.SetDefault(old)
	RouteSlog(l.Logger)
	slog.Warn("dead letter", "pid", "local/x")
	if !strings.Contains(buf.String(), `"level":"warn"`) || !strings.Contains(buf.String(), `"pid":"local/x"`) {
		t.Fatalf("slog line: %q", buf.String())
	}
}
