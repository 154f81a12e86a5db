package yamlkey

import "strings"

// Max is the YAML library's limit on an implicit key's length.
const Max = 1024

// Long finds the first line holding a key (text before ": " or a final
// ":") longer than Max, and says its line (from 1) and length.
func Long(data []byte) (line, length int, ok bool) {
	for i, l := range strings.Split(string(data), "\n") {
		if len(l) <= Max {
			continue
		}
		start := 0 // of the word being read
		for j := 0; j < len(l); j++ {
			switch c := l[j]; {
			case c == ' ' || c == '\t' || c == '{' || c == '[' || c == ',':
				start = j + 1
			case c == ':' && (j+1 == len(l) || l[j+1] == ' ' || l[j+1] == '\t' || l[j+1] == '\r'):
				if k := strings.Trim(l[start:j], `"'`); len(k) > Max {
					return i + 1, len(k), true
				}
			}
		}
	}
	return 0, 0, false
}
