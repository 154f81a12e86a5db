package logging

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
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

// DMN-17: the format actually written for each requested format, on a
// terminal and off one. auto follows the terminal; json and console are
// what the operator asked for either way.
func TestDMN17FormatChoice(t *testing.T) {
	cases := []struct {
		format   string
		terminal bool
		want     string
	}{
		{FormatAuto, true, FormatConsole},
		{FormatAuto, false, FormatJSON},
		{FormatJSON, true, FormatJSON},
		{FormatJSON, false, FormatJSON},
		{FormatConsole, true, FormatConsole},
		{FormatConsole, false, FormatConsole},
	}
	for _, c := range cases {
		if got := Resolve(c.format, c.terminal); got != c.want {
			t.Errorf("Resolve(%q, terminal=%v) = %q, want %q", c.format, c.terminal, got, c.want)
		}
		var buf bytes.Buffer
		l := newLogger(&buf, c.terminal, c.format, zerolog.InfoLevel)
		l.Info().Str("k", "v").Msg("hello")
		line := strings.TrimSpace(buf.String())
		isJSON := json.Valid([]byte(line))
		if l.Format() != c.want || isJSON != (c.want == FormatJSON) || !strings.Contains(line, "hello") || !strings.Contains(line, "k") {
			t.Errorf("%q on terminal=%v: Format() %q, wrote %q", c.format, c.terminal, l.Format(), line)
		}
		if c.want == FormatConsole && !c.terminal && strings.Contains(line, "\x1b[") {
			t.Errorf("console format off a terminal has colour codes: %q", line)
		}
	}
}

// DMN-17: SetFormat switches the logger and every logger derived from it
// (the daemon applies the config's log.format after it read the file).
func TestDMN17SetFormatReachesDerivedLoggers(t *testing.T) {
	var buf bytes.Buffer
	l := newLogger(&buf, false, FormatAuto, zerolog.InfoLevel)
	child := l.With().Str("actor", "root").Logger()
	child.Info().Msg("as json")
	l.SetFormat(FormatConsole)
	child.Info().Msg("as console")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !json.Valid([]byte(lines[0])) || json.Valid([]byte(lines[1])) || !strings.Contains(lines[1], "as console") || !strings.Contains(lines[1], "actor=root") {
		t.Fatalf("lines %q", lines)
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]string{"auto": FormatAuto, "JSON": FormatJSON, " console ": FormatConsole, "": FormatAuto} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil || !strings.Contains(err.Error(), "want auto, json or console") {
		t.Errorf("xml: %v", err)
	}
}

// DMN-17: IsTerminal on a real pseudo-terminal and on a pipe.
func TestDMN17IsTerminal(t *testing.T) {
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal to test with: %v", err)
	}
	defer ptmx.Close()
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("opening the pty's other end: %v", err)
	}
	defer pts.Close()
	if !IsTerminal(pts) {
		t.Error("a pty is not seen as a terminal")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if IsTerminal(w) || IsTerminal(&bytes.Buffer{}) {
		t.Error("a pipe or a buffer is seen as a terminal")
	}
}
