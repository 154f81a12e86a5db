// Package stackfile is the stack file: its model, parser, checks, the
// validation of a stack against a node, instance specs, revisions and the
// change plan (spec SVC-1..SVC-4). docs/stackfile.md is the operator's
// reference of the format.
//
// The pieces, in the order a deploy uses them:
//
//   - Parse / ParseFile read a Compose-shaped YAML file into a *Stack with
//     every default applied. Every problem is reported at once, as a
//     *ParseError whose Problems name file:line, the key path and what is
//     wrong: web.yaml:12: services.api.deploy.replicas: want a
//     non-negative integer, got "three". ValidateRest adds what the node
//     would refuse about the services a refused file did define well.
//   - Validate checks a stack against the node (Node: drivers, port and
//     host claims) without changing anything (SVC-2).
//   - Plan compares the running stack with the new one, per service:
//     create, update, scale, reconfigure, remove, unchanged (SVC-4).
//     FormatPlan prints it for `engenho apply --dry-run`.
//   - Marshal / Unmarshal are the journal's canonical JSON form; secret
//     values in it are sealed with the node key (NodeKey). Canonical is
//     that form with each secret as the key's digest of it: the same
//     bytes for the same definition on this node, to hash.
//   - InstanceSpec / SidecarSpec render the drivers.Spec of one instance,
//     named STACK-SERVICE-SLOT-ID and labelled per SVC-3;
//     Service.Revision is the hash of what defines an instance.
//
// Secrets (SEC-2): env values may be marked secret. An EnvValue never
// prints its secret (fmt, String, json.Marshal, yaml.Marshal all show
// Redaction); only Reveal and InstanceSpec hold it, and Marshal writes it
// only sealed under the node key. A revision hashes the node key's digest
// of a secret (BindSecrets), never the secret. Error messages never quote
// env values.
//
// Names (SEC-3): stack, sidecar and driver names are
// [a-z0-9][a-z0-9-]{0,62}, service names may also hold "_" (Compose does;
// instance names write it "-"), and edge hosts are lower-case DNS names,
// checked before anything uses them, so none can carry a path.
//
// Compose (compose_keys.go): every Compose key is honoured with its
// Compose meaning, ignored with a warning (Stack.Warnings), or refused with
// one problem that says why (ErrUnsupported for what engenho cannot run).
//
// Interpolation (interpolate.go) is Compose's, from Options.Env and the
// .env file of the project directory (envfile.go), never the process's
// own environment.
//
// Everything here is pure but for reading files: ParseFile its file, and
// with a project directory (Options.Dir) the .env, env_file and secret
// file: sources it names. No goroutines, no clocks.
//
// Layer: configs. It imports drivers (driver names and specs) and
// drivers/probe (Service.ProbeConfig), nothing above; messages carries its
// Service and Stack.
package stackfile
