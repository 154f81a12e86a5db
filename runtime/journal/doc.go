// Package journal is the daemon's durable memory (spec DMN-10): a badger/v4
// database under DATA/journal holding boot attempts, the node identity,
// desired state per stack (current and previous deployment), intents
// (stopped services), rollout progress, failed revisions, due times and owed
// lease releases per host, and the event log with its sequence numbers.
//
// Every record is JSON under a key namespaced by record type with a version
// prefix ("v1/desired/web"). Every write except event appends is synced
// before the call returns, so an acknowledged intent survives SIGKILL and
// power loss (REL-3). Event appends are group-committed by one writer
// goroutine: concurrent appends share one synced transaction, and an event
// is visible to readers and subscribers only once it is durable, so
// sequence numbers grow by one, with no gap and no reuse, across any crash
// (SVC-20). A background loop driven by clock.Clock prunes events by count
// and age and runs badger's value-log garbage collection.
//
// See docs/journal.md for the key layout and the guarantees in detail.
//
// Layer: runtime. It imports messages (the records it keeps) and
// drivers/clock; the actors reach it only through their own ports.
package journal
