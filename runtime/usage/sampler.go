package usage

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/engenho/engenho/drivers"
	"github.com/engenho/engenho/drivers/clock"
	"github.com/engenho/engenho/messages"
)

// Defaults for Options.
const (
	DefaultInterval = 5 * time.Second
	// Window is what CPU cores are averaged over (DRV-16).
	Window         = 10 * time.Second
	DefaultTimeout = 2 * time.Second
)

// Options configure a Sampler.
type Options struct {
	Clock clock.Clock
	// Interval between two rounds (default DefaultInterval).
	Interval time.Duration
	// Services returns every service's published status: which replicas
	// run, on which driver (supervise.Board.Services).
	Services func() []messages.ServiceStatus
	// Driver finds a driver by its config name.
	Driver func(name string) (drivers.Driver, bool)
	// Timeout bounds one Usage call (default DefaultTimeout).
	Timeout time.Duration
	Log     zerolog.Logger
}

// Replica is one replica's last sample, with who it is.
type Replica struct {
	Stack, Service string
	Slot           int
	Instance       string
	Usage          messages.ReplicaUsage
}

// Sampler reads every running replica's usage from its driver on one
// timer: one round every Interval walks the published services and calls
// Usage once per running replica, one call after another. There is no
// goroutine per replica or per service; between rounds it costs nothing.
type Sampler struct {
	o Options

	mu      sync.Mutex
	series  map[string]*series // by instance name
	timer   clock.Timer
	stopped bool
	running sync.WaitGroup
	cancel  context.CancelFunc
	ctx     context.Context
}

// series is one instance's samples within the window.
type series struct {
	who    Replica
	points []point
}

type point struct {
	at  time.Time
	cpu time.Duration
}

// New returns a stopped Sampler; Start arms it.
func New(o Options) *Sampler {
	if o.Clock == nil {
		o.Clock = clock.New()
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Sampler{o: o, series: map[string]*series{}, ctx: ctx, cancel: cancel}
}

// Start arms the timer: the first round comes one Interval from now.
func (s *Sampler) Start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped && s.timer == nil {
		s.timer = s.o.Clock.AfterFunc(s.o.Interval, s.tick)
	}
}

// Stop disarms the timer and waits for a round under way to end.
func (s *Sampler) Stop() {
	s.mu.Lock()
	s.stopped = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.cancel()
	s.running.Wait()
}

func (s *Sampler) tick() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.running.Add(1)
	s.mu.Unlock()
	defer s.running.Done()
	s.Round(s.ctx)
	s.mu.Lock()
	if !s.stopped {
		s.timer = s.o.Clock.AfterFunc(s.o.Interval, s.tick)
	}
	s.mu.Unlock()
}

// running reports whether a replica in phase has a run to measure.
func running(phase string) bool {
	switch phase {
	case "probing", "serving", "unhealthy":
		return true
	}
	return false
}

// Round reads every running replica's usage once. Replicas no longer
// running (or gone) are forgotten.
func (s *Sampler) Round(ctx context.Context) {
	seen := map[string]bool{}
	for _, svc := range s.o.Services() {
		drv, ok := s.o.Driver(svc.Driver)
		if !ok {
			continue
		}
		for _, r := range svc.Replicas {
			if r.Instance == "" || !running(r.Phase) || ctx.Err() != nil {
				continue
			}
			seen[r.Instance] = true
			cctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
			u, err := drv.Usage(cctx, r.Instance)
			cancel()
			if err != nil {
				s.o.Log.Debug().Err(err).Str("instance", r.Instance).Msg("usage not read")
				continue
			}
			s.add(Replica{Stack: r.Stack, Service: r.Service, Slot: r.Slot, Instance: r.Instance}, u, s.o.Clock.Now())
		}
	}
	s.mu.Lock()
	for name := range s.series {
		if !seen[name] {
			delete(s.series, name)
		}
	}
	s.mu.Unlock()
}

// add records one sample and works out the replica's last usage.
func (s *Sampler) add(who Replica, u drivers.Usage, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr := s.series[who.Instance]
	if sr == nil {
		sr = &series{}
		s.series[who.Instance] = sr
	}
	if n := len(sr.points); n > 0 && u.CPU < sr.points[n-1].cpu {
		sr.points = sr.points[:0] // the counter was reset: a new run (incus)
	}
	sr.points = append(sr.points, point{at: at, cpu: u.CPU})
	// Keep the newest sample at least Window old, and all after it.
	for len(sr.points) > 2 && at.Sub(sr.points[1].at) >= Window {
		sr.points = sr.points[1:]
	}
	who.Usage = messages.ReplicaUsage{
		At: at, CPUSeconds: u.CPU.Seconds(),
		MemoryBytes: u.MemoryBytes, MemoryPeakBytes: u.MemoryPeakBytes, Pids: u.Pids,
	}
	if first := sr.points[0]; len(sr.points) > 1 && at.After(first.at) {
		cores := float64(u.CPU-first.cpu) / float64(at.Sub(first.at))
		who.Usage.CPUCores = &cores
	}
	sr.who = who
}

// Get returns instance's last sample.
func (s *Sampler) Get(instance string) (messages.ReplicaUsage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sr, ok := s.series[instance]
	if !ok {
		return messages.ReplicaUsage{}, false
	}
	return sr.who.Usage, true
}

// All returns every replica's last sample, by stack, service, slot.
func (s *Sampler) All() []Replica {
	s.mu.Lock()
	out := make([]Replica, 0, len(s.series))
	for _, sr := range s.series {
		out = append(out, sr.who)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Stack != b.Stack {
			return a.Stack < b.Stack
		}
		if a.Service != b.Service {
			return a.Service < b.Service
		}
		if a.Slot != b.Slot {
			return a.Slot < b.Slot
		}
		return a.Instance < b.Instance
	})
	return out
}
