package daemon

import (
	"time"

	"github.com/engenho/engenho/actors/supervise/ladder"
	"github.com/engenho/engenho/configs/daemonconfig"
	"github.com/engenho/engenho/drivers/ports"
	"github.com/rs/zerolog"
)

// Settings is the daemon's view of its config file, resolved: what each
// boot phase and the runtime need.
type Settings struct {
	NodeName   string
	DataDir    string
	LogLevel   zerolog.Level
	LogFormat  string   // auto, json or console (DMN-17)
	StackFiles []string // resolved paths, sorted

	ControlGroup       string
	ControlIdleTimeout time.Duration
	ControlMaxRequest  int

	Process ProcessSettings
	Incus   IncusSettings
	// InstanceRange is where new instances' host ports come from (SVC-24).
	InstanceRange ports.Range

	EdgeListen    string
	MetricsListen string

	Strategy    string
	MaxRestarts int
	Period      time.Duration
	Ladder      ladder.Config

	Sweep       time.Duration
	DrainBudget time.Duration
	// UsageInterval is how often replicas' usage is read (0: never).
	UsageInterval time.Duration
	StepTimeout   time.Duration

	EventsMaxCount int
	EventsMaxAge   time.Duration
	// JournalReserve is the free space the journal keeps (0: its default).
	JournalReserve int64

	ChaosEnabled bool

	// Config is the resolved config these settings came from (nil for the
	// defaults): the activator's object store and the edge read it.
	Config *daemonconfig.Config
}

// ProcessSettings configure the process driver.
type ProcessSettings struct {
	Enabled     bool
	LogMaxBytes int64
	LogFiles    int
	CgroupRoot  string
}

// IncusSettings configure the incus driver.
type IncusSettings struct {
	Enabled    bool
	Socket     string
	Project    string
	RemoteURL  string
	ClientCert string
	ClientKey  string
	ServerCA   string
}

// DefaultSettings are the spec's defaults; a config file overrides them.
func DefaultSettings() Settings {
	return Settings{
		DataDir:            "/var/lib/engenho",
		LogLevel:           zerolog.InfoLevel,
		LogFormat:          "auto",
		ControlIdleTimeout: 5 * time.Minute,
		ControlMaxRequest:  1 << 20,
		Process:            ProcessSettings{Enabled: true},
		InstanceRange:      ports.DefaultRange,
		Strategy:           "one_for_one",
		MaxRestarts:        3,
		Period:             5 * time.Second,
		Ladder:             ladder.Default(),
		Sweep:              10 * time.Second,
		UsageInterval:      5 * time.Second,
		DrainBudget:        60 * time.Second,
		StepTimeout:        2 * time.Minute,
	}
}

// SettingsFrom maps a loaded config onto the daemon's settings.
func SettingsFrom(c *daemonconfig.Config) Settings {
	s := DefaultSettings()
	s.NodeName, s.DataDir, s.LogLevel, s.StackFiles = c.Node.Name, c.DataDir, c.Log.ZerologLevel(), c.StackFiles
	if c.Log.Format != "" {
		s.LogFormat = c.Log.Format
	}
	s.ControlGroup, s.ControlIdleTimeout, s.ControlMaxRequest = c.Control.Group, c.Control.IdleTimeout, int(c.Control.MaxRequest)
	p := c.Drivers.Process
	s.Process = ProcessSettings{Enabled: p.Enabled, LogMaxBytes: int64(p.LogMaxBytes), LogFiles: p.LogFiles, CgroupRoot: p.CgroupRoot}
	s.InstanceRange = c.Ports.Range()
	in := c.Drivers.Incus
	s.Incus = IncusSettings{Enabled: in.Enabled, Socket: in.Socket, Project: in.Project, RemoteURL: in.RemoteURL,
		ClientCert: in.ClientCert, ClientKey: in.ClientKey, ServerCA: in.ServerCA}
	s.EdgeListen, s.MetricsListen = c.Edge.Listen, c.Metrics.Listen
	sup := c.Supervision
	s.Strategy, s.MaxRestarts, s.Period, s.Ladder = sup.Strategy, sup.MaxRestarts, sup.Period, ladderConfig(sup.Ladder)
	s.Sweep, s.DrainBudget, s.UsageInterval = c.Sweep.Interval, c.Drain.Budget, c.Usage.Interval
	if c.Boot.StepTimeout > 0 {
		s.StepTimeout = c.Boot.StepTimeout
	}
	s.EventsMaxCount, s.EventsMaxAge = c.Journal.Events.Retention()
	s.JournalReserve = int64(c.Journal.Reserve)
	s.ChaosEnabled = c.Chaos.Enabled
	s.Config = c
	return s
}

// ladderConfig is the config file's ladder as the supervision layer reads it.
func ladderConfig(l daemonconfig.Ladder) ladder.Config {
	return ladder.Config{
		Immediate: l.Immediate,
		Delays:    append([]time.Duration(nil), l.Delays...),
		Cap:       l.Cap,
		Jitter:    l.Jitter,
		Stable:    l.Stable,
	}
}
