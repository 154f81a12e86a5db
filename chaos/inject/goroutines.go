package inject

import (
	"bytes"
	"runtime"
	"strings"
)

// Goroutines groups this process's goroutines by where they wait and who
// created them: key "TOP-FUNCTION <- CREATOR", value the count. The chaos
// suite compares two such maps to find leaked goroutines (CHS-3).
func Goroutines() map[string]int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return GroupGoroutines(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// GroupGoroutines groups a runtime.Stack(all) dump; see Goroutines.
func GroupGoroutines(dump []byte) map[string]int {
	out := map[string]int{}
	for _, block := range bytes.Split(dump, []byte("\n\n")) {
		lines := strings.Split(strings.TrimSpace(string(block)), "\n")
		if len(lines) < 2 || !strings.HasPrefix(lines[0], "goroutine ") {
			continue
		}
		top := funcName(lines[1])
		creator := "?"
		for _, l := range lines[1:] {
			if rest, ok := strings.CutPrefix(l, "created by "); ok {
				creator = rest
				if i := strings.Index(creator, " in goroutine"); i >= 0 {
					creator = creator[:i]
				}
			}
		}
		out[top+" <- "+creator]++
	}
	return out
}

// funcName strips the argument list from a stack frame's function line.
func funcName(line string) string {
	line = strings.TrimSpace(line)
	if i := strings.LastIndex(line, "("); i > 0 {
		return line[:i]
	}
	return line
}
