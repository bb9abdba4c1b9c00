package globalsummary

import (
	"sync"
	"time"
)

// ErrorWindow counts requests that ended, and how many of them failed, over a
// sliding window of fixed buckets: the error rate a member reports, and the
// one a hub observes per member. Safe for concurrent use; time is passed in.
type ErrorWindow struct {
	mu      sync.Mutex
	width   time.Duration
	buckets []errorBucket
}

type errorBucket struct {
	epoch    int64 // which width-long interval since the zero time the counts belong to
	total    int
	failures int
}

// DefaultErrorWindow is the span members report over.
const DefaultErrorWindow = 30 * time.Second

// NewErrorWindow counts over span in n buckets (span/n wide, at least 1 ms).
func NewErrorWindow(span time.Duration, n int) *ErrorWindow {
	n = max(n, 1)
	return &ErrorWindow{width: max(span/time.Duration(n), time.Millisecond), buckets: make([]errorBucket, n)}
}

func (w *ErrorWindow) epoch(now time.Time) int64 { return now.UnixNano() / int64(w.width) }

// Record counts one request that ended at now.
func (w *ErrorWindow) Record(failed bool, now time.Time) {
	e := w.epoch(now)
	w.mu.Lock()
	defer w.mu.Unlock()
	b := &w.buckets[int(uint64(e)%uint64(len(w.buckets)))]
	if b.epoch != e {
		*b = errorBucket{epoch: e}
	}
	b.total++
	if failed {
		b.failures++
	}
}

// Rate returns the failed share of the requests that ended in the window up
// to now, and how many ended (rate 0 when none did).
func (w *ErrorWindow) Rate(now time.Time) (rate float64, requests int) {
	e := w.epoch(now)
	n := int64(len(w.buckets))
	failures := 0
	w.mu.Lock()
	for _, b := range w.buckets {
		if b.epoch > e-n && b.epoch <= e {
			requests += b.total
			failures += b.failures
		}
	}
	w.mu.Unlock()
	if requests == 0 {
		return 0, 0
	}
	return float64(failures) / float64(requests), requests
}

// Reset forgets every count.
func (w *ErrorWindow) Reset() {
	w.mu.Lock()
	clear(w.buckets)
	w.mu.Unlock()
}
