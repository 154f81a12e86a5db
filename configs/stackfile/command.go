package stackfile

import (
	"errors"
	"strings"
)

// Variables engenho substitutes in argv-like fields (command, args,
// healthcheck test, hibernate seed, sidecar command) when it builds an
// instance spec. Any other ${...} is left as written, for the shell.
// Env values are never substituted: a secret may hold a "$".
const (
	VarBin      = "ENGENHO_BIN"      // path of the engenho binary
	VarStack    = "ENGENHO_STACK"    // stack name
	VarService  = "ENGENHO_SERVICE"  // service name
	VarSlot     = "ENGENHO_SLOT"     // replica slot, 1..replicas
	VarInstance = "ENGENHO_INSTANCE" // instance name
)

var knownVars = map[string]bool{VarBin: true, VarStack: true, VarService: true, VarSlot: true, VarInstance: true}

// envOnlyVars are ENGENHO_ variables of an instance's environment that
// engenho does not substitute (they are not known when the spec is built);
// ${...} of them is left as written, for the shell.
var envOnlyVars = map[string]bool{"ENGENHO_DATA_DIR": true}

// reservedEnv are set by engenho in every instance's environment; a stack
// file cannot set them.
var reservedEnv = []string{VarStack, VarService, VarSlot, VarInstance}

// checkVars refuses ${ENGENHO_...} references engenho does not know, so a
// typo fails at parse time instead of passing an empty string.
func checkVars(s string) error {
	rest := s
	for {
		i := strings.Index(rest, "${ENGENHO_")
		if i < 0 {
			return nil
		}
		rest = rest[i+2:]
		end := strings.IndexByte(rest, '}')
		if end < 0 {
			return errors.New("unterminated ${ENGENHO_...}")
		}
		if name := rest[:end]; !knownVars[name] && !envOnlyVars[name] {
			return errors.New("unknown variable ${" + name + "} (known: ENGENHO_BIN, ENGENHO_STACK, ENGENHO_SERVICE, ENGENHO_SLOT, ENGENHO_INSTANCE)")
		}
		rest = rest[end+1:]
	}
}

// expand substitutes the known variables in each element of argv.
func expand(argv []string, vars map[string]string) []string {
	if argv == nil {
		return nil
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		if strings.Contains(a, "${ENGENHO_") {
			for name, v := range vars {
				a = strings.ReplaceAll(a, "${"+name+"}", v)
			}
		}
		out[i] = a
	}
	return out
}

// shellOperators are words a shell would act on that splitCommand passes
// to the program as arguments.
var shellOperators = map[string]bool{"&&": true, "||": true, "|": true, ";": true, "&": true,
	">": true, ">>": true, "<": true, "2>": true, "2>&1": true, "&>": true}

// shellOperator returns the first word of s, written without quotes, that
// is a shell operator ("" when none): `./migrate && exec ./serve` runs no
// shell, so its author most likely meant ["sh", "-c", "..."].
func shellOperator(s string) string {
	var cur strings.Builder
	plain := true // no quote or backslash in the word so far
	word := func() string {
		w, p := cur.String(), plain
		cur.Reset()
		plain = true
		if p && shellOperators[w] {
			return w
		}
		return ""
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\r':
			if op := word(); op != "" {
				return op
			}
		case '\'', '"':
			plain = false
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return "" // splitCommand reports it
			}
			i += end + 1
		case '\\':
			plain = false
			i++
		default:
			cur.WriteByte(c)
		}
	}
	return word()
}

// splitCommand splits a command string the way a POSIX shell splits words,
// without any expansion: blanks separate words; '...' is literal; "..."
// allows \" \\ \$ \` escapes; a backslash outside quotes escapes the next
// character. Use ["sh", "-c", "..."] for pipes, globs or variables.
func splitCommand(s string) ([]string, error) {
	var (
		words  []string
		cur    strings.Builder
		inWord bool
	)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			inWord = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("unterminated single quote")
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case c == '"':
			inWord = true
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("\"\\$`", s[j+1]) >= 0 {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, errors.New("unterminated double quote")
			}
			i = j
		case c == '\\':
			inWord = true
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(s[i])
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
