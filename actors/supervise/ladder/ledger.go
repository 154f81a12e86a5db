package ladder

import (
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/engenho/engenho/messages"
)

// Ledger holds the entries of many generation keys under one config. It is
// owned by a single actor and is not safe for concurrent use.
type Ledger struct {
	cfg     Config
	rnd     *rand.Rand
	entries map[string]messages.Ledger
}

// NewLedger returns an empty ledger; seed feeds jitter only.
func NewLedger(cfg Config, seed uint64) *Ledger {
	return &Ledger{cfg: cfg, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), entries: map[string]messages.Ledger{}}
}

// Config returns the ledger's config.
func (l *Ledger) Config() Config { return l.cfg }

// SetConfig changes the shape for future decisions; entries are kept.
func (l *Ledger) SetConfig(cfg Config) { l.cfg = cfg }

// Fail charges a failure to key.
func (l *Ledger) Fail(key string, now time.Time, reason string) Decision {
	return l.FailWith(l.cfg, key, now, reason)
}

// FailWith charges a failure to key, paced by cfg instead of the ledger's
// config (a child with a ladder of its own, SUP-20).
func (l *Ledger) FailWith(cfg Config, key string, now time.Time, reason string) Decision {
	e, d := Fail(cfg, l.entries[key], now, reason, l.rnd)
	l.entries[key] = e
	return d
}

// Started marks key's attempt as started and unconfirmed. A key with no
// entry stays without one: a first start is not history (SUP-13).
func (l *Ledger) Started(key string) {
	if e, ok := l.entries[key]; ok {
		l.entries[key] = Started(e)
	}
}

// Observe records key's stability; a full stable window drops the entry.
// It reports whether the entry was dropped.
func (l *Ledger) Observe(key string, now time.Time, stable bool) bool {
	e, ok := l.entries[key]
	if !ok {
		return false
	}
	e, reset := Observe(l.cfg, e, now, stable)
	if reset {
		delete(l.entries, key)
		return true
	}
	l.entries[key] = e
	return false
}

// Get returns key's entry, if it has history.
func (l *Ledger) Get(key string) (messages.Ledger, bool) {
	e, ok := l.entries[key]
	return e, ok
}

// Ready reports whether key may be attempted at now; a key with no history
// always may.
func (l *Ledger) Ready(key string, now time.Time) bool {
	e, ok := l.entries[key]
	return !ok || Ready(e, now)
}

// Forget drops key, e.g. when its instance is gone (SUP-13).
func (l *Ledger) Forget(key string) { delete(l.entries, key) }

// ForgetPrefix drops every key starting with prefix: a new deployment or an
// operator's retry clears a service's backoff (SUP-17).
func (l *Ledger) ForgetPrefix(prefix string) {
	for k := range l.entries {
		if strings.HasPrefix(k, prefix) {
			delete(l.entries, k)
		}
	}
}

// Len is the number of keys with history.
func (l *Ledger) Len() int { return len(l.entries) }

// Keys returns the keys with history, sorted.
func (l *Ledger) Keys() []string {
	keys := make([]string, 0, len(l.entries))
	for k := range l.entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Snapshot copies every entry.
func (l *Ledger) Snapshot() map[string]messages.Ledger {
	out := make(map[string]messages.Ledger, len(l.entries))
	for k, e := range l.entries {
		out[k] = e
	}
	return out
}
