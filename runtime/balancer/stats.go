package balancer

// PortStats are one port's counters (spec SVC-22: backends, accepted
// connections, active, rate).
type PortStats struct {
	Name string `json:"name"`
	// Addr is the bound listen address.
	Addr string `json:"addr"`
	// Accepted counts client connections accepted since Listen.
	Accepted uint64 `json:"accepted"`
	// Active counts client connections open now.
	Active int `json:"active"`
	// Failed counts client connections closed because no backend could be
	// reached (none in rotation, or every one failed to dial).
	Failed uint64 `json:"failed"`
	// Rate is accepted connections per second over the last RateWindow.
	Rate float64 `json:"rate"`
	// Backends lists the rotation in order, then the draining backends.
	Backends []BackendStats `json:"backends"`
}

// BackendStats are one backend's counters on one port.
type BackendStats struct {
	ID         string `json:"id"`
	Addr       string `json:"addr"`
	InRotation bool   `json:"in_rotation"`
	Draining   bool   `json:"draining"`
	// Suspect: it refused a dial in the last Options.SuspectFor; it is
	// tried only when no unsuspected backend is left.
	Suspect bool `json:"suspect"`
	// Active counts connections open (or being dialed) to it now.
	Active int `json:"active"`
	// Accepted counts connections established to it.
	Accepted uint64 `json:"accepted"`
	// DialFailures counts dials to it that failed.
	DialFailures uint64 `json:"dial_failures"`
}

func (p *port) stats() PortStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.opts.Clock.Now()
	s := PortStats{
		Name:     p.name,
		Addr:     p.ln.Addr().String(),
		Accepted: p.accepted,
		Active:   p.active,
		Failed:   p.failed,
		Rate:     p.rate.perSecond(now),
		Backends: make([]BackendStats, 0, len(p.rotation)+len(p.draining)),
	}
	for _, b := range append(append([]*backend{}, p.rotation...), p.draining...) {
		s.Backends = append(s.Backends, BackendStats{
			ID:           b.id,
			Addr:         b.addr,
			InRotation:   b.drain == nil,
			Draining:     b.drain != nil,
			Suspect:      now.Before(b.suspectUntil),
			Active:       b.active,
			Accepted:     b.accepted,
			DialFailures: b.dialFailures,
		})
	}
	return s
}
