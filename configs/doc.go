// Package configs holds the shipped configuration: the demo daemon config,
// demo stacks and the systemd unit. The Go files here only embed them so the
// binary can run on the embedded defaults.
//
// Layer: configs (the file schemas and parsers, beside the files they
// describe: configs/stackfile, configs/daemonconfig, and configs/yamlkey
// beneath both). It imports nothing
// from the module.
package configs
