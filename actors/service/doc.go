// Package service is the service actor: it keeps a service's slots filled
// with healthy instances of its current revision, rolls out new revisions in
// batches with rollback, fills slots whose instance is gone, feeds the
// balancer its rotation and raises the service's health events (spec
// SVC-12..SVC-20, SVC-22). Its children are replica actors, one per
// instance.
//
// The decisions are a pure core (core.go, events.go): Step(cfg, state,
// event, now) returns the new state and the effects the actor shell
// performs (messages/step): its own (spawn, retire, publish, ...) and the
// shared ones (the wake timer, events) that supervise.Apply runs.
//
// Layer: actors. Of the actors it imports supervise and its child replica,
// plus the layers below. Its ports (Ports, Store, supervise.Emitter) are
// interfaces that runtime/daemon fills.
package service
