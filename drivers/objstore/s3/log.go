package s3

import (
	"fmt"

	"github.com/aws/smithy-go/logging"
	"github.com/rs/zerolog"
)

// sdkLogger forwards the SDK's notices (retries only: the client log mode
// never includes requests or their headers) to zerolog.
func sdkLogger(l *zerolog.Logger) logging.Logger {
	return logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
		ev := l.Debug()
		if c == logging.Warn {
			ev = l.Warn()
		}
		ev.Str("component", "objstore-s3").Str("sdk_message", fmt.Sprintf(format, v...)).Msg("sdk")
	})
}
