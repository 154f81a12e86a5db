package messages

import "time"

// Ledger is the backoff ledger of one generation key (spec SUP-10..SUP-13):
// actors/supervise/ladder charges and resets it; a replica's status carries
// its slot's entry, and the control socket shows it (`engenho why`). A key
// with no history has no entry at all (SUP-13).
type Ledger struct {
	// Failures is the count of consecutive failures charged.
	Failures int `json:"failures"`
	// LastReason is why the last failure was charged.
	LastReason string `json:"last_reason,omitempty"`
	// LastFailure is when it was charged.
	LastFailure time.Time `json:"last_failure"`
	// NextAttempt is the earliest time the next attempt may run.
	NextAttempt time.Time `json:"next_attempt"`
	// Unconfirmed is set when a start call succeeded and the instance has
	// not yet been stable for the whole window (SUP-12).
	Unconfirmed bool `json:"unconfirmed"`
	// StableSince is when the current continuous stable stretch began; zero
	// when the instance is not stable now.
	StableSince time.Time `json:"stable_since"`
}
