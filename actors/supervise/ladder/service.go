package ladder

import "github.com/engenho/engenho/configs/stackfile"

// OfService is a service's x-engenho.backoff and stable window as a
// ladder: it paces the service's workload restarts (SUP-10, SUP-11).
func OfService(e stackfile.Engenho) Config {
	return Config{Immediate: e.Backoff.Immediate, Delays: e.Backoff.Delays, Cap: e.Backoff.Cap,
		Jitter: e.Backoff.Jitter, Stable: e.Stable}
}

// ForActors paces the restarts of a service's own actors (its replica
// actors, a host's sidecars): the service's x-engenho.backoff when its file
// declares one, else the zero Config, which a supervisor reads as the
// daemon's supervision.ladder (SUP-20).
func ForActors(e stackfile.Engenho) Config {
	if !e.Backoff.Declared {
		return Config{}
	}
	return OfService(e)
}
