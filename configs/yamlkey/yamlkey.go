package yamlkey

import (
	"strings"
	"unicode/utf8"
)

// Max is the YAML library's limit on an implicit key: the characters from
// the key's start, its quotes included, to its colon.
const Max = 1024

// Long finds the first line holding a key (text before ": " or a final
// ":") over Max, and says its line (from 1) and its length in characters,
// counted as the library counts them (quotes included, not bytes).
func Long(data []byte) (line, length int, ok bool) {
	for i, l := range strings.Split(string(data), "\n") {
		if len(l) <= Max {
			continue // fewer bytes than Max: fewer characters too
		}
		start := 0 // of the word being read
		for j := 0; j < len(l); j++ {
			switch c := l[j]; {
			case c == ' ' || c == '\t' || c == '{' || c == '[' || c == ',':
				start = j + 1
			case c == ':' && (j+1 == len(l) || l[j+1] == ' ' || l[j+1] == '\t' || l[j+1] == '\r'):
				if n := utf8.RuneCountInString(l[start:j]); n > Max {
					return i + 1, n, true
				}
			}
		}
	}
	return 0, 0, false
}
