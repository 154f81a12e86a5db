package logging

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// Logger is the daemon's logger with a level that can change while running.
type Logger struct {
	zerolog.Logger
	level atomic.Int32
}

// New returns a logger writing to w at level. format is "json", "console"
// or "auto" (console when w is a terminal).
func New(w io.Writer, format string, level zerolog.Level) *Logger {
	if format == "console" || (format == "auto" && IsTerminal(w)) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	l := &Logger{Logger: zerolog.New(w).With().Timestamp().Logger()}
	l.SetLevel(level)
	return l
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
