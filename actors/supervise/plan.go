package supervise

// restartPlan is the pure core of a strategy (SUP-7): given the children in
// start order and the one that failed, which running children to stop (in
// the order to stop them: reverse start order) and which to start (in start
// order). The failed child is never in stop: it has already ended.
func restartPlan(s Strategy, order []string, failed string) (stop, start []string) {
	at := -1
	for i, n := range order {
		if n == failed {
			at = i
			break
		}
	}
	if at < 0 {
		return nil, nil
	}
	var group []string
	switch s {
	case OneForAll:
		group = order
	case RestForOne:
		group = order[at:]
	default:
		group = order[at : at+1]
	}
	for i := len(group) - 1; i >= 0; i-- {
		if group[i] != failed {
			stop = append(stop, group[i])
		}
	}
	return stop, append([]string(nil), group...)
}

// window counts restarts in a sliding period (SUP-8). It is a pure value
// operated on with times passed in.
type window struct {
	times []int64 // unix nanoseconds, ascending
}

// add records a restart at now and reports whether the count within the
// period now exceeds the maximum.
func (w *window) add(in Intensity, now int64) bool {
	cut := now - int64(in.Period)
	keep := w.times[:0]
	for _, t := range w.times {
		if t > cut {
			keep = append(keep, t)
		}
	}
	w.times = append(keep, now)
	return len(w.times) > in.MaxRestarts
}
