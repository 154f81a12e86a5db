package journal

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// Badger's routine info messages are kept out of an info-level log; at
// debug level they appear, tagged component=badger.
func TestBadgerLogsAreQuietAtInfo(t *testing.T) {
	for _, level := range []zerolog.Level{zerolog.InfoLevel, zerolog.DebugLevel} {
		var buf bytes.Buffer
		dir := t.TempDir()
		for i := 0; i < 2; i++ { // the reopen replays and logs
			j, _ := openTest(t, dir, func(o *Options) { o.Logger = zerolog.New(&buf).Level(level) })
			must(j.Append(evt("x")))
			noErr(t, j.Close())
		}
		badger := strings.Count(buf.String(), `"component":"badger"`)
		switch {
		case level == zerolog.InfoLevel && buf.Len() != 0:
			t.Fatalf("info level logged: %s", buf.String())
		case level == zerolog.DebugLevel && badger == 0:
			t.Fatalf("debug level: no badger lines in %s", buf.String())
		}
	}
}
