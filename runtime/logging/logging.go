package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Log formats (DMN-17): FormatAuto is console on a terminal, JSON lines
// otherwise.
const (
	FormatAuto    = "auto"
	FormatJSON    = "json"
	FormatConsole = "console"
)

// ParseFormat checks a log format name: auto, json or console.
func ParseFormat(s string) (string, error) {
	switch f := strings.ToLower(strings.TrimSpace(s)); f {
	case FormatAuto, FormatJSON, FormatConsole:
		return f, nil
	case "":
		return FormatAuto, nil
	}
	return "", fmt.Errorf("log format %q: want auto, json or console", s)
}

// Resolve turns a requested format into the one written: auto is console
// when the output is a terminal and JSON otherwise; json and console are
// taken as they are. An unknown name counts as auto.
func Resolve(format string, terminal bool) string {
	switch format {
	case FormatJSON, FormatConsole:
		return format
	}
	if terminal {
		return FormatConsole
	}
	return FormatJSON
}

// Logger is the daemon's logger with a level and a format that can change
// while running.
type Logger struct {
	zerolog.Logger
	level atomic.Int32
	out   *formatWriter
}

// New returns a logger writing to w at level. format is "json", "console"
// or "auto" (console when w is a terminal).
func New(w io.Writer, format string, level zerolog.Level) *Logger {
	return newLogger(w, IsTerminal(w), format, level)
}

// newLogger is New with the terminal check done by the caller.
func newLogger(w io.Writer, terminal bool, format string, level zerolog.Level) *Logger {
	out := &formatWriter{json: w, terminal: terminal,
		console: zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !terminal}}
	out.set(format)
	l := &Logger{Logger: zerolog.New(out).With().Timestamp().Logger(), out: out}
	l.SetLevel(level)
	return l
}

// SetFormat changes the format of this logger and every logger derived
// from it: the daemon sets the config's log.format once it has read it,
// unless --log-format chose one.
func (l *Logger) SetFormat(format string) { l.out.set(format) }

// Format is the format written now: json or console.
func (l *Logger) Format() string {
	if l.out.consoleOn.Load() {
		return FormatConsole
	}
	return FormatJSON
}

// formatWriter takes zerolog's JSON lines and writes them as they are or
// through the console writer (which parses each line), so one logger can
// switch formats without rebuilding the loggers derived from it.
type formatWriter struct {
	json      io.Writer
	console   zerolog.ConsoleWriter
	terminal  bool
	consoleOn atomic.Bool
}

func (w *formatWriter) set(format string) {
	w.consoleOn.Store(Resolve(format, w.terminal) == FormatConsole)
}

func (w *formatWriter) Write(p []byte) (int, error) {
	if w.consoleOn.Load() {
		return w.console.Write(p)
	}
	return w.json.Write(p)
}

// Level is the current level.
func (l *Logger) Level() zerolog.Level { return zerolog.Level(l.level.Load()) }

// SetLevel changes the level of this logger and every logger derived from
// it. It uses zerolog's global level, checked before an event is built, so
// a disabled debug line costs nothing; there is one daemon per process.
func (l *Logger) SetLevel(level zerolog.Level) {
	l.level.Store(int32(level))
	zerolog.SetGlobalLevel(level)
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// RouteSlog makes log/slog's default logger write into l: debug and info
// from libraries become debug lines, warn and error keep their level.
func RouteSlog(l zerolog.Logger) {
	slog.SetDefault(slog.New(slogHandler{l: l.With().Str("source", "slog").Logger()}))
}

type slogHandler struct {
	l     zerolog.Logger
	attrs []slog.Attr
}

func (h slogHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h slogHandler) Handle(_ context.Context, r slog.Record) error {
	var e *zerolog.Event
	switch {
	case r.Level >= slog.LevelError:
		e = h.l.Error()
	case r.Level >= slog.LevelWarn:
		e = h.l.Warn()
	default:
		e = h.l.Debug()
	}
	for _, a := range h.attrs {
		e = e.Str(a.Key, a.Value.String())
	}
	r.Attrs(func(a slog.Attr) bool {
		e = e.Str(a.Key, a.Value.String())
		return true
	})
	e.Msg(r.Message)
	return nil
}

func (h slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return slogHandler{l: h.l, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h slogHandler) WithGroup(string) slog.Handler { return h }
