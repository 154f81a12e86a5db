// Package messages declares every message that actors of the supervision
// tree send each other, one file per domain (spec SUP-2). Every message is a
// value: it carries copies, never pointers into another actor's state.
package messages
