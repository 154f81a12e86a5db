package drivers

import "sync"

// TailLines returns the last n lines of b (all of b when n <= 0). A last
// line without its newline counts as a line. Drivers use it for
// LogOptions.Tail.
func TailLines(b []byte, n int) []byte {
	if n <= 0 || len(b) == 0 {
		return b
	}
	end := len(b)
	if b[end-1] == '\n' {
		end--
	}
	for i := end - 1; i >= 0; i-- {
		if b[i] == '\n' {
			n--
			if n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}

// OnceWatch is a Watch callback that runs at most once and never after
// Cancel returned: the contract of Driver.Watch.
type OnceWatch struct {
	mu   sync.Mutex
	done bool
	fn   func(Exit)
}

// NewOnceWatch wraps fn.
func NewOnceWatch(fn func(Exit)) *OnceWatch { return &OnceWatch{fn: fn} }

// Fire calls the callback with e, unless it already ran or was cancelled.
func (w *OnceWatch) Fire(e Exit) {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return
	}
	w.done = true
	w.mu.Unlock()
	w.fn(e)
}

// Cancel makes every later Fire do nothing.
func (w *OnceWatch) Cancel() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
