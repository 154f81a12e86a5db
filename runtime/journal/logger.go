package journal

import (
	"fmt"
	"strings"

	"github.com/rs/zerolog"
)

// badgerLogger adapts badger's printf-style logger to zerolog. Badger's
// info messages (table counts, replay progress) are routine, so they are
// logged at debug level and its debug messages at trace.
type badgerLogger struct{ l zerolog.Logger }

func msg(format string, args []any) string {
	return strings.TrimSpace(fmt.Sprintf(format, args...))
}

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error().Msg(msg(f, a)) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn().Msg(msg(f, a)) }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Debug().Msg(msg(f, a)) }
func (b badgerLogger) Debugf(f string, a ...any)   { b.l.Trace().Msg(msg(f, a)) }
