// Package messages declares every message that actors of the supervision
// tree send each other, one file per domain (spec SUP-2). Every message is a
// value: it carries copies, never pointers into another actor's state.
//
// Layer: messages, the vocabulary every layer above shares. It imports only
// drivers, drivers/probe and configs/stackfile; actors/, runtime/, chaos/
// and cmd/ import it.
package messages
