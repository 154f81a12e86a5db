// Package chaos is the chaos suite (spec CHS-1..CHS-5): seeded campaigns
// that start real daemons (the engenho binary) in temporary data
// directories with chaos enabled, inject faults drawn from the seed (see
// schedule), check the invariants after each fault within its recovery
// bound (see invariant) and write a JSON and Markdown report (see report).
//
// Run is the campaign; Scenarios are the named fault mixes (`ci`, `soak`,
// `smoke` and the self-test scenarios). The in-daemon fault hooks are in
// chaos/inject. `engenho chaos run` is the command line; docs/chaos.md the
// operator's guide.
//
// Layer: chaos, above runtime/: it starts daemons (the chaos build of the
// binary) and talks to them over runtime/control. It imports its
// subpackages and any layer below. No untagged file outside chaos/ imports
// it: only cmd/engenho's files tagged chaos do.
package chaos
