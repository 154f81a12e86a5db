// Package daemonconfig reads and validates the daemon's configuration file,
// engenho.yaml (spec DMN-15, DMN-16); it sits beside the shipped example in
// configs/. The file watcher that triggers reloads is runtime/config.
//
// Load reads the YAML file once, keeps its bytes for the Digest, and builds
// a typed Config: defaults, then the file, then ENGENHO_SECTION_KEY
// environment overrides (viper layers them), then command-line Overrides.
// The file is also parsed with go.yaml.in/yaml/v3 into a node tree, because
// viper keeps no line numbers and silently ignores keys it does not know:
// that pass rejects unknown and duplicate keys and values of the wrong shape
// with their line, and remembers every key's line so a bad value is
// reported as "config FILE:LINE: KEY: what is wrong". Viper then supplies
// each key's effective value and a small converter per Go type gives the
// typed value (viper's own decoding would quote values in its errors, and a
// value may be a secret, SEC-2).
//
// Diff classifies what changed between two configs: applied in place,
// needing a runtime restart, or a relaunch of the process. ResolveStacks
// expands the stack globs (IsGlob and GlobCandidate say what a pattern is
// and which files it picks). Changed supports the failed-boot retry rule:
// if the file changed since it was read, retry once.
//
// The reference of every key is docs/config.md.
//
// Layer: configs (file schemas and parsers). It imports only drivers/ (the
// object store's key rules) and no engenho package above it; the daemon
// converts what it needs (the ladder, the store settings) at its
// composition root, runtime/daemon.
package daemonconfig
