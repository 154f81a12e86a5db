// Package yamlkey finds a YAML key too long for the YAML library to read
// as a key, so the stack file and daemon config parsers can say which
// line holds it instead of passing on the library's confusing error.
//
// Layer: configs. It imports the standard library only; configs/stackfile
// and configs/daemonconfig import it (they do not import each other).
package yamlkey
