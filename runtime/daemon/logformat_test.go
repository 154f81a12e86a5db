package daemon

import (
	"bytes"
	"testing"

	"github.com/engenho/engenho/configs/daemonconfig"
	"github.com/engenho/engenho/runtime/logging"
	"github.com/rs/zerolog"
)

// DMN-17: the daemon writes the config's log.format once it has read the
// file, unless --log-format chose one (LogFormatFixed), which wins.
func TestDMN17ConfigLogFormatUnlessTheFlagChose(t *testing.T) {
	cases := []struct {
		flag   string
		fixed  bool
		config string
		want   string
	}{
		{logging.FormatAuto, false, logging.FormatConsole, logging.FormatConsole},
		{logging.FormatAuto, false, logging.FormatAuto, logging.FormatJSON}, // a buffer is no terminal
		{logging.FormatJSON, true, logging.FormatConsole, logging.FormatJSON},
		{logging.FormatConsole, true, logging.FormatJSON, logging.FormatConsole},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		log := logging.New(&buf, c.flag, zerolog.InfoLevel)
		dir := t.TempDir()
		load := func(string, string) (Settings, daemonconfig.Digest, error) {
			s := DefaultSettings()
			s.DataDir, s.LogFormat = dir, c.config
			return s, daemonconfig.Digest{}, nil
		}
		d, err := New(Options{ConfigPath: "unused.yaml", Log: log, LogFormatFixed: c.fixed, Load: load})
		if err != nil {
			t.Fatal(err)
		}
		d.dir.Unlock()
		if got := log.Format(); got != c.want {
			t.Errorf("flag %q (given: %v), config %q: logging %q, want %q", c.flag, c.fixed, c.config, got, c.want)
		}
	}
}
