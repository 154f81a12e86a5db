package balancer

import "time"

// RateWindow is the span Stats.Rate averages over.
const RateWindow = 10 * time.Second

const rateBuckets = int64(RateWindow / time.Second)

// rateWindow counts events in one-second buckets over the last RateWindow.
type rateWindow struct {
	counts [rateBuckets]uint64
	second [rateBuckets]int64 // the unix second each bucket counts
}

func (w *rateWindow) add(now time.Time) {
	s := now.Unix()
	i := s % rateBuckets
	if w.second[i] != s {
		w.second[i], w.counts[i] = s, 0
	}
	w.counts[i]++
}

// perSecond is the mean rate over the window ending at now.
func (w *rateWindow) perSecond(now time.Time) float64 {
	s := now.Unix()
	var sum uint64
	for i := range w.counts {
		if age := s - w.second[i]; age >= 0 && age < rateBuckets {
			sum += w.counts[i]
		}
	}
	return float64(sum) / float64(rateBuckets)
}
